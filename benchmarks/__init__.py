"""Benchmarks of our adapter layer (see benchmarks/README.md); never shipped."""
