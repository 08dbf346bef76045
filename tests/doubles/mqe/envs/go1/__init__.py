"""Double of MAPush's ``mqe.envs.go1`` (tests only)."""
