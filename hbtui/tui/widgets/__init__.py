"""Widgets of the app: nouns that render one thing each."""
