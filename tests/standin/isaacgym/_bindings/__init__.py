"""Stand-in for Isaac Gym's ``_bindings`` package (tests only)."""
