"""The core: datasets, scoring, grading, reviews, verdicts, events, errors, text.

What every layer above may use. It imports nothing of hbtui outside itself (pyproject.toml's
layers contract holds it to that), and never Textual or Rich.
"""
