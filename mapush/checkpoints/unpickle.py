"""Loading a checkpoint executes nothing: every ``torch.load`` of a file a user names
(``module.pt``, HARL's ``actor_agent*.pt``/``critic*.pt``, ``--command-net``) goes through
:func:`load`, whose unpickler finds only what such files hold: the classes and rebuild
functions listed in ``ALLOWED`` (``unpickle.yaml``, which says where each comes from).
Anything else (``os.system``, ``builtins.eval``, a class of another package) is refused
before it is called, as one UsageError naming it."""
import inspect
import io
import pickle
import types
import zipfile
from pathlib import Path
from typing import Any, Dict, FrozenSet  # noqa: F401 (type comments)

import yaml

from mapush.common.files import read_regular_bytes
from mapush.errors import UsageError

_LISTED = yaml.safe_load((Path(__file__).resolve().parent / "unpickle.yaml").read_text())
ALLOWED = {m: frozenset(names) for m, names in _LISTED.items()}  # type: Dict[str, FrozenSet[str]]


class Refused(pickle.UnpicklingError):
    """A file asked for something ``ALLOWED`` does not hold."""


def allowed(module: str, name: str) -> bool:
    return name in ALLOWED.get(module, ())


def pickle_module(stand_in: Any = None) -> Any:
    """A ``pickle`` module for ``torch.load(pickle_module=...)`` whose unpickler finds only
    ``ALLOWED`` names (its ``load``, which torch's legacy format calls, too). ``stand_in``
    (module, name) -> class, if given, takes the place of an allowed class that cannot be
    imported here (reading a checkpoint's shapes without openrl or Isaac Gym)."""

    class Unpickler(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            if not allowed(module, name):
                raise Refused("%s.%s" % (module, name))
            try:
                return super().find_class(module, name)
            except (ImportError, AttributeError):
                if stand_in is None:
                    raise
                return stand_in(module, name)

    def load(file: Any, **kwargs: Any) -> Any:
        return Unpickler(file, **kwargs).load()

    module = types.ModuleType("mapush_allowlist_pickle")
    module.Unpickler = Unpickler  # type: ignore[attr-defined]
    module.load = load  # type: ignore[attr-defined]
    module.__name__ = "pickle"  # torch.load checks pickle_module for the weights-only path
    return module


def is_torchscript(data: bytes) -> bool:
    """A zip laid out as TorchScript's (``constants.pkl``, ``code/``), which ``torch.load``
    would hand to ``torch.jit.load`` (torch/serialization.py: ``_is_torchscript_zip``)."""
    if not zipfile.is_zipfile(io.BytesIO(data)):
        return False
    names = [n.split("/", 1)[-1] for n in zipfile.ZipFile(io.BytesIO(data)).namelist()]
    return any(n == "constants.pkl" or n.startswith("code/") for n in names)


# Bytes per element of the storages torch pickles by name (torch/storage.py).
_ELEMENT = {"Untyped": 1, "Byte": 1, "Char": 1, "Bool": 1, "QUInt8": 1, "QInt8": 1,
            "Short": 2, "Half": 2, "BFloat16": 2, "Int": 4, "Float": 4, "QInt32": 4,
            "Long": 8, "Double": 8, "ComplexFloat": 8, "ComplexDouble": 16}


class _Dry:
    """What every allowed name stands for in :func:`declared_bytes`: built, filled and
    called at will, holding nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> "_Dry":
        return _Dry()

    def __setstate__(self, state: Any) -> None:
        pass

    def __setitem__(self, key: Any, value: Any) -> None:
        pass

    def append(self, value: Any) -> None:
        pass

    def extend(self, values: Any) -> None:
        pass


def declared_bytes(data: bytes) -> int:
    """The bytes of tensor storage a checkpoint's pickle declares, found by unpickling it dry
    (every allowed name a :class:`_Dry`, nothing of torch's called): torch allocates what a
    legacy file declares before reading it, so a file of 300 bytes could ask for terabytes
    (torch/serialization.py: ``_legacy_load``'s ``persistent_load``)."""
    sizes = {}  # type: Dict[Any, int]

    class Dry(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            if module == "torch" and name[:-len("Storage")] in _ELEMENT:
                return type(name, (_Dry,), {})
            if not allowed(module, name):
                raise Refused("%s.%s" % (module, name))
            return _Dry

        def persistent_load(self, pid: Any) -> Any:
            if isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage":
                element = _ELEMENT.get(getattr(pid[1], "__name__", "")[:-len("Storage")], 1)
                sizes[pid[2]] = int(pid[4]) * element
            return _Dry()

    if zipfile.is_zipfile(io.BytesIO(data)):
        archive = zipfile.ZipFile(io.BytesIO(data))
        records = [i for i in archive.infolist() if i.filename.endswith("/data.pkl")]
        if any(i.compress_type != zipfile.ZIP_STORED for i in archive.infolist()):
            raise Refused("compressed records, which torch.save never writes")
        streams = [io.BytesIO(archive.read(i)) for i in records]  # type: Any
    else:
        streams = [io.BytesIO(data)] * 4  # magic, protocol, sys_info, then the objects
    try:
        for stream in streams:
            Dry(stream, encoding="latin1").load()
    except Refused:
        raise
    except Exception:  # not a pickle we can read: torch's own reader says what is wrong
        pass
    return sum(sizes.values())


def load(path: Any, device: Any, what: str, stand_in: Any = None) -> Any:
    """``torch.load`` of a file the user named, through the allowlist, on torch 1.x and 2.x
    alike; a refused name is one UsageError naming it. The file is read once (a regular
    file, without blocking), checked, and the same bytes loaded: a TorchScript archive is
    refused before any torch call. Torch 1.x's ``torch.load`` replaces any
    ``pickle_module`` but its weights-only one by ``pickle`` itself
    (torch/serialization.py: ``load``), so there its readers are called directly."""
    data = read_regular_bytes(path)
    if is_torchscript(data):
        raise UsageError("%s %s: refused to load it: a TorchScript file, not a checkpoint "
                         "(loading one runs its code; docs/cli.md, \"What a checkpoint may "
                         "hold\")" % (what, Path(str(path))))
    try:
        declared = declared_bytes(data)
    except Refused as exc:
        raise UsageError(refusal(what, path, exc))
    if declared > len(data):
        raise UsageError("%s %s: refused to load it: it declares %d bytes of tensors in a "
                         "file of %d bytes (a damaged or forged checkpoint; save it again)"
                         % (what, Path(str(path)), declared, len(data)))
    import torch

    module = pickle_module(stand_in)
    fh = io.BytesIO(data)
    try:
        if int(torch.__version__.split(".")[0]) >= 2:
            kwargs = {"map_location": device, "pickle_module": module}
            if "weights_only" in inspect.signature(torch.load).parameters:
                kwargs["weights_only"] = False  # torch >= 2.6: our unpickler decides
            return torch.load(fh, **kwargs)
        from torch import serialization

        if not serialization._is_zipfile(fh):  # the legacy format
            fh.seek(0)
            return serialization._legacy_load(fh, device, module, encoding="utf-8")
        with serialization._open_zipfile_reader(fh) as archive:
            return serialization._load(archive, device, module, encoding="utf-8")
    except Refused as exc:
        raise UsageError(refusal(what, path, exc))


def refusal(what: str, path: Any, exc: Exception) -> str:
    return ("%s %s: refused to load it: it asks for %s, which no checkpoint of OpenRL, HARL or "
            "MAPush holds (loading a checkpoint never runs code from it; docs/cli.md, "
            "\"What a checkpoint may hold\")" % (what, Path(str(path)), exc))
