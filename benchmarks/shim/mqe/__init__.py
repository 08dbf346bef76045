"""Benchmark stand-in for MAPush's ``mqe`` package (see ``envs/utils.py``)."""
