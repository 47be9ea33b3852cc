from hbtui.cli import entry

entry()
