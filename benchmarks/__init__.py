"""Benchmarks (issue 8): figures as JSON under benchmarks/results/, run with `make bench`."""
