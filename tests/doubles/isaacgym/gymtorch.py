"""Stand-in for ``isaacgym.gymtorch`` (the real one compiles a torch extension)."""
