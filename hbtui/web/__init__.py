"""`hbtui serve`: the app in a browser."""
