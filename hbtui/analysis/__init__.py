"""Computations over what the store reads: comparisons, statistics, progress, reviews' glance."""
