"""Checkpoints: writing them (``store``: atomic, listed, resumable), reading the policy in
them (``policy``: OpenRL modules, HARL state dicts, input dims without Isaac Gym), and
which checkpoint a path means (``source``: ours or the authors', and its object)."""
