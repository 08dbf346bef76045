"""Isaac Gym stand-in (tests only; never shipped, never on a product path): the part of Isaac
Gym Preview 4's Python API that MQE at the pin calls, so that MQE's own code runs in the
tests. See tests/standin/README.md. Like the real package, it refuses to load after torch.
"""
import sys

if "torch" in sys.modules and not getattr(sys.modules.get("torch"), "_mqe_double_ok", False):
    raise ImportError("PyTorch was imported before isaacgym modules. Please import torch "
                      "after isaacgym modules.")
