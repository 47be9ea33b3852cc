"""What is made of a run for people and files: reports, the printer, the exports, metadata."""
