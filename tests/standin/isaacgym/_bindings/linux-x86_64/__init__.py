"""Stand-in for Isaac Gym's compiled bindings folder (tests only)."""
