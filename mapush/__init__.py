"""mapush-env: a reproducible training environment around MAPush.

Data flows one way: cli -> spec -> preflight -> child -> env -> adapter -> trainer -> run dir.
Only :mod:`mapush.sim` imports ``isaacgym`` or ``mqe``. Each module: docs/architecture.md.
"""

__version__ = "0.1.0"
