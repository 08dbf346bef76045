"""Reading policy checkpoints: ours (PPO and HARL) and the authors' published ``module.pt``."""
import hashlib
from pathlib import Path
from typing import Any, Dict, Optional

from mapush.checkpoints import unpickle
from mapush.checkpoints.store import read_meta, refuse_damaged
from mapush.common.hashing import sha256
from mapush.errors import UsageError

MODULE_FILE = "module.pt"
HARL_ACTOR = "actor_agent0.pt"


def module_path(checkpoint: Any) -> Path:
    """``module.pt`` of a checkpoint folder, or the file itself."""
    path = Path(checkpoint)
    return path / MODULE_FILE if path.is_dir() else path


def kind(checkpoint: Any) -> Optional[str]:
    """``"openrl"`` (a pickled module), ``"harl"`` (actor state dicts) or None."""
    path = Path(checkpoint)
    if path.is_file():
        return "openrl" if path.name.endswith(".pt") else None
    if (path / MODULE_FILE).is_file():
        return "openrl"
    if (path / HARL_ACTOR).is_file():
        return "harl"
    return None


def checkpoint_sha256(checkpoint: Any) -> str:
    """sha256 of a checkpoint's weights: its ``module.pt``, or for a HARL checkpoint folder
    its ``*.pt`` files (names and bytes, in name order)."""
    path = Path(checkpoint)
    if kind(path) == "openrl":
        return sha256(module_path(path))
    digest = hashlib.sha256()
    for file in sorted(path.glob("*.pt")):
        digest.update(file.name.encode())
        digest.update(sha256(file).encode())
    return digest.hexdigest()


def load_module(checkpoint: Any, device: Any, what: str, lenient: bool = False) -> Any:
    """The whole OpenRL module in ``checkpoint``; what cannot be read is one UsageError
    (docs/architecture.md, "Modules")."""
    path = module_path(checkpoint)
    if not path.is_file():
        raise UsageError("%s %s: no %s in it; pass a checkpoint folder of a PPO run or a "
                         "module.pt" % (what, checkpoint, MODULE_FILE))
    refuse_damaged(path.parent, read_meta(path.parent) or {}, what)
    try:
        module = lenient_load(path, what) if lenient else unpickle.load(path, device, what)
    except UsageError:
        raise
    except ImportError as exc:
        missing = getattr(exc, "name", None) or str(exc)
        raise UsageError("%s %s: unpickling it needs the module %s, which is missing here "
                         "(an OpenRL module.pt needs openrl, gym, jsonargparse and Isaac Gym's "
                         "Python 3.8 bindings isaacgym._bindings.linux-x86_64.gym_38: use the "
                         "image, e.g. make shell)" % (what, path, missing))
    except Exception as exc:  # noqa: BLE001 - any other unpickling failure: unreadable
        raise UsageError("%s %s: cannot read it (%s: %s); use another checkpoint"
                         % (what, path, type(exc).__name__,
                            str(exc).splitlines()[0] if str(exc) else ""))
    if not hasattr(module, "models"):
        raise UsageError("%s %s: not an OpenRL module (no models)" % (what, path))
    # its device bookkeeping pointed at ``device``: the networks keep the device they were
    # trained on in ``tpdv`` (the authors': cuda), which ``map_location`` does not touch
    import torch

    module.device = torch.device(device)
    for model in module.models.values():
        for sub in model.modules():
            if isinstance(getattr(sub, "tpdv", None), dict):
                sub.tpdv = dict(sub.tpdv, device=module.device)
    return module


# -- reading shapes without the classes -------------------------------------------------
class _Stand(object):
    """Stands in for a class that cannot be imported: keeps whatever state it is given."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._args = args

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, dict):
            self.__dict__.update(state)
        elif isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict):
            self.__dict__.update(state[0] or {})
            self.__dict__.update(state[1])
        else:
            self.__dict__["_state"] = state


def _stand_in(module: str, name: str) -> Any:
    return type(name, (_Stand,), {"__module__": "mapush.stand." + module})


def _first_linear_in(obj: Any, depth: int = 0) -> Optional[int]:
    """The input width of the first linear layer in a module or a stand-in, its
    sub-modules searched in definition order."""
    import torch

    if isinstance(obj, torch.nn.Linear):
        return int(obj.in_features)
    modules = getattr(obj, "__dict__", {}).get("_modules")
    if depth > 20 or not isinstance(modules, dict):
        return None
    for child in modules.values():
        found = _first_linear_in(child, depth + 1) if child is not None else None
        if found is not None:
            return found
    return None


def lenient_load(file: Path, what: str) -> Any:
    """The allowlist's ``torch.load`` (:mod:`mapush.checkpoints.unpickle`) with stand-ins for
    the allowed classes that cannot be imported here (docs/architecture.md, "Modules")."""
    return unpickle.load(file, "cpu", what, stand_in=_stand_in)


def input_dim(checkpoint: Any) -> int:
    """The obs dim a checkpoint's policy takes, read without openrl or Isaac Gym."""
    path = Path(checkpoint)
    if kind(path) == "harl":
        state = unpickle.load(path / HARL_ACTOR, "cpu", str(path))
        for name, tensor in state.items():
            if name.endswith("weight") and tensor.dim() == 2:
                return int(tensor.shape[1])
        raise UsageError("%s: no weight matrix in %s" % (path, HARL_ACTOR))
    file = module_path(path)
    if not file.is_file():
        raise UsageError("%s: not a checkpoint (no %s, no %s)" % (path, MODULE_FILE, HARL_ACTOR))
    try:
        module = lenient_load(file, str(file))
    except (UsageError, ModuleNotFoundError):  # no torch here: the CLI's one line says so
        raise
    except Exception as exc:  # noqa: BLE001 - not a pickled module at all
        raise UsageError("%s: cannot read it (%s: %s)" % (file, type(exc).__name__,
                                                          str(exc).splitlines()[0]))
    models = getattr(module, "models", None)
    if models is None and isinstance(getattr(module, "__dict__", None), dict):
        models = module.__dict__.get("models")
    policy = models.get("policy") if isinstance(models, dict) else None
    found = _first_linear_in(policy) if policy is not None else None
    if found is None:
        raise UsageError("%s: not an OpenRL policy (no policy network with a linear input "
                         "layer)" % file)
    return found


# OpenRL's value normalisers (base_value_network.py:32, base_policy_network.py:32) and their
# statistics (valuenorm.py:27-35).
VALUE_NORMS = ("value_normalizer", "policy_value_normalizer")
NORM_STATS = ("running_mean", "running_mean_sq", "debiasing_term")


def normalizer_stats(module: Any) -> Dict[str, Dict[str, Any]]:
    """``{"<model>.<normaliser>": {statistic: tensor}}`` of an OpenRL module
    (docs/architecture.md, "Modules")."""
    out = {}  # type: Dict[str, Dict[str, Any]]
    for name, model in module.models.items():
        for attr in VALUE_NORMS:
            norm = getattr(model, attr, None)
            if norm is not None and all(hasattr(norm, stat) for stat in NORM_STATS):
                out["%s.%s" % (name, attr)] = {stat: getattr(norm, stat).detach()
                                               for stat in NORM_STATS}
    return out
