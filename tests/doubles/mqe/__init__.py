"""Double of MAPush's ``mqe`` package (tests only)."""
