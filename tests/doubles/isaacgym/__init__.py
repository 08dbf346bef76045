"""Stand-in for Isaac Gym's package (tests only). Like the real one, it refuses to load
after torch."""
import sys

if "torch" in sys.modules and not getattr(sys.modules.get("torch"), "_mqe_double_ok", False):
    raise ImportError("PyTorch was imported before isaacgym modules. Please import torch "
                      "after isaacgym modules.")
