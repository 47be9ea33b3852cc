"""The app's screens (one module each) and its modal dialogs."""
