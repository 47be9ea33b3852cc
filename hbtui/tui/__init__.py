"""The Textual app: screens, widgets and one stylesheet. Reads the store; starts engines."""
