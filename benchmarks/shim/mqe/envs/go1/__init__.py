"""Benchmark stand-in for ``mqe.envs.go1``."""
