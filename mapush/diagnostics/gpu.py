"""GPU facts for the doctor and crash reports: devices, driver, torch's architectures."""
import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from mapush.common.files import read_regular
from mapush.errors import UsageError

FAKE_ENV = "MAPUSH_FAKE_GPU"

_TORCH_PROBE = r"""
import json, sys
out = {"devices": []}
try:
    import torch
    out["torch_version"] = torch.__version__
    out["torch_cuda"] = torch.version.cuda
    out["arch_list"] = list(torch.cuda.get_arch_list()) if torch.version.cuda else []
    out["cuda_available"] = bool(torch.cuda.is_available())
    if out["cuda_available"]:
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            d = {"index": i, "name": p.name, "capability": [p.major, p.minor],
                 "total_mb": p.total_memory / 1048576.0}
            if "--free" in sys.argv:
                free, _total = torch.cuda.mem_get_info(i)
                d["free_mb"] = free / 1048576.0
            out["devices"].append(d)
except Exception as exc:
    out["error"] = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
print(json.dumps(out))
"""


@dataclass
class DeviceFacts:
    index: int
    name: str = "unknown GPU"
    capability: Optional[Tuple[int, int]] = None
    total_mb: Optional[float] = None
    free_mb: Optional[float] = None

    @property
    def sm(self) -> Optional[str]:
        return None if self.capability is None else "sm_%d%d" % tuple(self.capability)


@dataclass
class GpuFacts:
    """What the machine offers: torch's devices (indices as ``cuda:N`` uses them)."""
    devices: List[DeviceFacts] = field(default_factory=list)
    driver_version: Optional[str] = None
    torch_version: Optional[str] = None
    torch_cuda: Optional[str] = None
    arch_list: List[str] = field(default_factory=list)
    cuda_available: bool = False
    nvidia_smi: bool = False
    error: Optional[str] = None
    source: str = "probe"

    @property
    def visible(self) -> bool:
        return bool(self.devices)

    def device(self, index: int) -> Optional[DeviceFacts]:
        return next((dev for dev in self.devices if dev.index == index), None)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "GpuFacts":
        data = dict(data)
        devices = []
        for raw in data.pop("devices", []) or []:
            raw = dict(raw)
            if raw.get("capability") is not None:
                raw["capability"] = tuple(int(x) for x in raw["capability"])
            devices.append(DeviceFacts(**raw))
        known = set(cls.__dataclass_fields__)  # type: ignore[attr-defined]
        return cls(devices=devices, **{k: v for k, v in data.items() if k in known})


def device_index(device: str) -> Optional[int]:
    """``cuda:N`` -> N, ``cuda`` -> 0, ``cpu`` -> None."""
    if not str(device).startswith("cuda"):
        return None
    _, _, idx = str(device).partition(":")
    return int(idx) if idx else 0


def _run(cmd: List[str], timeout: float) -> Tuple[int, str, str]:
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, "", str(exc)
    return proc.returncode, proc.stdout, proc.stderr


def nvidia_smi_query(timeout: float = 20.0) -> Tuple[Optional[List[Dict[str, Any]]], str]:
    """Rows of ``nvidia-smi --query-gpu`` (None and the reason when it fails)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None, "nvidia-smi not found"
    fields = "index,uuid,name,driver_version,memory.total,memory.free"
    code, out, err = _run([exe, "--query-gpu=" + fields, "--format=csv,noheader,nounits"], timeout)
    if code != 0:
        msg = (err or out).strip()
        return None, msg.splitlines()[0] if msg else "nvidia-smi exited with %d" % code
    rows = []
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 6:
            continue
        try:
            rows.append({"index": int(parts[0]), "uuid": parts[1], "name": parts[2],
                         "driver_version": parts[3], "total_mb": float(parts[4]),
                         "free_mb": float(parts[5])})
        except ValueError:
            continue
    return rows, ""


def proc_driver_version() -> Optional[str]:
    """Kernel driver version from ``/proc/driver/nvidia/version`` (visible in containers)."""
    try:
        with open("/proc/driver/nvidia/version") as fh:
            text = fh.read()
    except OSError:
        return None
    for word in text.split():
        parts = word.split(".")
        if len(parts) in (2, 3) and all(p.isdigit() for p in parts):
            return word
    return None


def _smi_row_for(index: int, rows: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The nvidia-smi row of torch device ``index``, following CUDA_VISIBLE_DEVICES."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        ids = [v.strip() for v in visible.split(",") if v.strip()]
        if index >= len(ids):
            return None
        want = ids[index]
        return next((row for row in rows if (want.isdigit() and row["index"] == int(want))
                     or row["uuid"].startswith(want)), None)
    return next((row for row in rows if row["index"] == index), None)


def gather(timeout: float = 120.0) -> GpuFacts:
    """The GPU facts of this machine (or of ``$MAPUSH_FAKE_GPU``)."""
    fake = os.environ.get(FAKE_ENV)
    if fake:
        try:
            facts = GpuFacts.from_dict(json.loads(read_regular(fake)))
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            raise UsageError("%s=%s: not a GPU facts file (%s): fix it, or unset %s"
                             % (FAKE_ENV, fake, exc, FAKE_ENV))
        facts.source = "fake:%s" % fake
        return facts
    rows, smi_error = nvidia_smi_query()
    probe_argv = [sys.executable, "-c", _TORCH_PROBE] + (["--free"] if rows is None else [])
    code, out, err = _run(probe_argv, timeout)
    try:
        probe = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        probe = {"devices": [], "error": "torch probe failed (%d): %s"
                 % (code, (err.strip().splitlines() or ["no output"])[-1])}
    facts = GpuFacts.from_dict(dict(probe, nvidia_smi=rows is not None))
    for dev in facts.devices:
        row = _smi_row_for(dev.index, rows or [])
        if row is not None:
            dev.free_mb, dev.total_mb = row["free_mb"], row["total_mb"]
    facts.driver_version = rows[0]["driver_version"] if rows else proc_driver_version()
    if not facts.devices:
        reasons = [r for r in (probe.get("error"), smi_error) if r]
        if facts.torch_version and not facts.torch_cuda:
            reasons.insert(0, "torch %s is a CPU-only build" % facts.torch_version)
        facts.error = "; ".join(reasons) or "torch sees no CUDA device"
    return facts


def free_mb_now(device: str) -> Optional[float]:
    """Free memory of ``device`` right now, from nvidia-smi (no CUDA context), for crash
    reports; None when unknown."""
    index = device_index(device)
    if index is None:
        return None
    fake = os.environ.get(FAKE_ENV)
    if fake:
        dev = gather().device(index)
        return dev.free_mb if dev else None
    rows, _ = nvidia_smi_query(timeout=10.0)
    row = _smi_row_for(index, rows or [])
    return None if row is None else row["free_mb"]


def arch_support(capability: Tuple[int, int], arch_list: List[str]) -> Tuple[str, str]:
    """Can torch's kernels run on ``capability``? -> (how, the closest architecture)
    (docs/architecture.md, "Modules")."""
    major, minor = capability
    target = "sm_%d%d" % (major, minor)
    if target in arch_list:
        return "native", target
    best = None
    for arch in arch_list:
        kind, _, digits = arch.partition("_")
        if not digits.isdigit() or len(digits) < 2:
            continue
        a_major, a_minor = int(digits[:-1]), int(digits[-1])
        if kind == "sm" and a_major == major and a_minor <= minor:
            if best is None or a_minor > best[1]:
                best = (a_major, a_minor)
    if best is not None:
        return "compatible", "sm_%d%d" % best
    ptx = [a for a in arch_list if a.startswith("compute_") and a[8:].isdigit()
           and (int(a[8:-1]), int(a[-1])) <= (major, minor)]
    if ptx:
        return "ptx", sorted(ptx, key=lambda a: int(a[8:]))[-1]
    return "none", ""
