"""hbtui: HealthBench in the terminal."""

__version__ = "0.2.0"
