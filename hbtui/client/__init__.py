"""The model's side: the chat client, its per-endpoint limiter, and the connection checks.

It never imports the store, nor the store it (pyproject.toml's layers contract).
"""
