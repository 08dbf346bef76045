"""``mapush doctor`` and the preflight of ``mapush train``: check the machine before a run."""
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from mapush import physx_budget
from mapush.diagnostics import gpu as gpu_facts, step_check
from mapush.diagnostics.gpu import GpuFacts, device_index
from mapush.diagnostics.rendering import datacenter_gpu, problems
from mapush.errors import FIXES, ISAACGYM_HINT, MapushError, UsageError
from mapush.objects import ConfigReadError, find_objects, mapush_root, object_facts
from mapush.provenance import PATCH_COMPONENTS, patch_record_dir, patch_records
from mapush.spec import MID, TRAIN_NUM_ENVS, RunSpec

OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"

# CUDA 11.x minor-version compatibility: any CUDA 11.x application runs on a Linux driver
# >= 450.80.02 (452.39 on Windows), with a limited feature set (no PTX JIT of newer PTX).
# CUDA 11.6 itself ships with >= 510.39.01 (11.6 GA), which has the full feature set.
# Sources: https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html
# and the CUDA 11.6 release notes, table "CUDA Toolkit and Corresponding Driver Versions".
MIN_DRIVER = (450, 80, 2)
TOOLKIT_DRIVER = (510, 39, 1)

# The authors' stack: torch 2.3.1+cu121, built for sm_50 to sm_90 (env/pins.env, STACK=cu121).
CU121_ARCHS = ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")
HOPPER_MAJOR = 9


def in_container() -> bool:
    """Whether this process runs in a container (Docker, Podman, Apptainer/Singularity);
    ``MAPUSH_WHERE=host|container`` says it outright. Fixes name what works where they run."""
    where = os.environ.get("MAPUSH_WHERE", "").strip().lower()
    if where in ("host", "container"):
        return where == "container"
    return any(os.path.exists(p) for p in ("/.dockerenv", "/run/.containerenv")) or any(
        os.environ.get(v) for v in ("container", "APPTAINER_CONTAINER", "SINGULARITY_CONTAINER"))


@dataclass
class Check:
    name: str
    status: str
    message: str
    fix: str = ""

    def line(self) -> str:
        text = "%-6s %-12s %s" % ("[%s]" % self.status, self.name, self.message)
        if self.fix and self.status in (WARN, FAIL):
            text += " -- fix: " + self.fix
        return text


@dataclass
class Options:
    num_envs: int = TRAIN_NUM_ENVS[MID]
    sim_device: str = "cuda:0"
    rl_device: str = "cuda:0"
    object: Optional[str] = None
    video: bool = False
    check_step: bool = False
    task: str = MID  # the level whose step --check-step checks
    check_step_envs: int = step_check.ENVS
    check_step_steps: int = step_check.STEPS

    @property
    def gpus(self) -> List[int]:
        """The GPU indices the run uses (none: a CPU-only run)."""
        return sorted({i for i in (device_index(self.sim_device), device_index(self.rl_device))
                       if i is not None})


def _fmt(version: Tuple[int, ...]) -> str:
    return ".".join("%02d" % p if i else str(p) for i, p in enumerate(version))


# --- GPU checks -----------------------------------------------------------------------

def check_gpu_visible(opts: Options, facts: GpuFacts) -> Check:
    if not facts.visible:
        here = "in this container" if in_container() else "on this host"
        return Check("gpu", FAIL, "no GPU visible %s (%s)" % (here, facts.error or
                                                                  "no CUDA device"),
                     FIXES["gpu_in_container"] if in_container() else FIXES["gpu_on_host"])
    missing = [i for i in opts.gpus if facts.device(i) is None]
    names = ", ".join("cuda:%d %s (%s)" % (d.index, d.name, d.sm or "sm unknown")
                      for d in facts.devices)
    if missing:
        return Check("gpu", FAIL, "cuda:%d requested but only %d GPU(s) visible: %s"
                     % (missing[0], len(facts.devices), names),
                     "use --sim-device/--rl-device cuda:0..cuda:%d, or make the GPU visible %s"
                     % (len(facts.devices) - 1,
                        "to the container (make GPU=N, docker run --gpus '\"device=N\"')"
                        if in_container() else "(CUDA_VISIBLE_DEVICES)"))
    return Check("gpu", OK, "%d GPU(s): %s" % (len(facts.devices), names))


def require_devices(sim_device: str, rl_device: str) -> None:
    """eval's and export's device preflight: a GPU that is not here is one line."""
    opts = Options(sim_device=sim_device, rl_device=rl_device)
    check = check_gpu_visible(opts, gpu_facts.gather()) if opts.gpus else None
    if check is not None and check.status == FAIL:
        raise UsageError("--sim-device %s --rl-device %s: %s; pass --sim-device cpu --rl-device "
                         "cpu, or %s" % (sim_device, rl_device, check.message, check.fix))


def check_driver(opts: Options, facts: GpuFacts) -> Check:
    try:
        version = tuple(int(p) for p in str(facts.driver_version).strip().split("."))
    except ValueError:
        return Check("driver", WARN, "NVIDIA driver version unknown (%s)"
                     % (facts.driver_version or "nvidia-smi unavailable"),
                     "run nvidia-smi on the host; CUDA 11.6 needs a driver >= %s" % _fmt(MIN_DRIVER))
    if version < MIN_DRIVER:
        return Check("driver", FAIL, "driver %s is older than %s, the minimum for CUDA 11.x "
                     "(the image's torch is a CUDA 11.6 build)" % (facts.driver_version,
                                                                  _fmt(MIN_DRIVER)),
                     "install an NVIDIA driver >= %s on the host (>= %s recommended)"
                     % (_fmt(MIN_DRIVER), _fmt(TOOLKIT_DRIVER)))
    if version < TOOLKIT_DRIVER:
        return Check("driver", WARN, "driver %s runs CUDA 11.6 only through minor-version "
                     "compatibility (no PTX JIT)" % facts.driver_version,
                     "a driver >= %s gives CUDA 11.6 its full feature set" % _fmt(TOOLKIT_DRIVER))
    return Check("driver", OK, "driver %s (CUDA 11.6 needs >= %s)"
                 % (facts.driver_version, _fmt(MIN_DRIVER)))


def check_arch(opts: Options, facts: GpuFacts) -> Check:
    if not facts.arch_list:
        if facts.torch_version and not facts.torch_cuda:
            return Check("gpu_arch", FAIL, "torch %s is a CPU-only build" % facts.torch_version,
                         "install the pinned torch (TORCH_VERSION in env/pins.env) from "
                         "TORCH_INDEX_URL, not PyPI; 'make build' does")
        return Check("gpu_arch", WARN, "torch's CUDA architectures unknown (%s)"
                     % (facts.error or "torch not probed"), "check 'python -c \"import torch; "
                     "print(torch.cuda.get_arch_list())\"'")
    problems, notes = [], []
    wanted = opts.gpus
    for dev in facts.devices:
        if dev.index not in wanted or dev.capability is None:
            continue
        kind, closest = gpu_facts.arch_support(dev.capability, facts.arch_list)
        if kind == "none":
            problems.append((dev, "cuda:%d %s is %s, not among torch %s's architectures (%s)"
                             % (dev.index, dev.name, dev.sm, facts.torch_version,
                                " ".join(facts.arch_list))))
        elif kind == "ptx":
            notes.append("cuda:%d %s (%s) runs torch through PTX JIT of %s (slow first start)"
                         % (dev.index, dev.name, dev.sm, closest))
        else:
            notes.append("cuda:%d %s runs %s kernels" % (dev.index, dev.sm, closest))
    if problems:
        dev, message = problems[0]
        fits = gpu_facts.arch_support(dev.capability, list(CU121_ARCHS))[0] != "none"
        stack = (FIXES["cu121"] if fits else FIXES["no_stack"]) % {"sm": dev.sm}
        return Check("gpu_arch", FAIL, message + ": expect 'no kernel image is available'",
                     FIXES["arch"] % {"torch": facts.torch_version, "sm": dev.sm, "stack": stack})
    hopper = [dev for dev in facts.devices if dev.index in wanted and dev.capability
              and dev.capability[0] == HOPPER_MAJOR]
    if hopper:
        return Check("gpu_arch", WARN, "; ".join(notes) + "; but Isaac Gym itself is reported "
                     "to segfault on H100 upstream (%s)" % hopper[0].name, FIXES["hopper"])
    if any("PTX" in n for n in notes):
        return Check("gpu_arch", WARN, "; ".join(notes),
                     "a torch build with native kernels for this GPU avoids the JIT")
    return Check("gpu_arch", OK, "; ".join(notes) or "no GPU in use")


def check_devices(opts: Options, facts: Optional[GpuFacts]) -> Check:
    sim, rl = device_index(opts.sim_device), device_index(opts.rl_device)
    if facts is not None and not facts.visible and (sim is not None or rl is not None):
        return Check("devices", SKIP, "sim_device %s, rl_device %s: no GPU visible"
                     % (opts.sim_device, opts.rl_device))
    if sim is not None and rl is not None and sim != rl:
        return Check("devices", WARN, "sim_device %s and rl_device %s are different GPUs: every "
                     "step copies observations and actions between them (incident 003's "
                     "device-side asserts came from such a split)" % (opts.sim_device,
                                                                      opts.rl_device),
                     "use the same GPU for both (--sim-device cuda:N --rl-device cuda:N) unless "
                     "the policy does not fit beside the simulation")
    if sim is None and rl is not None:
        return Check("devices", WARN, "simulation on the CPU, policy on %s: PhysX on the CPU is "
                     "much slower than the GPU pipeline" % opts.rl_device,
                     "use --sim-device %s for the GPU pipeline" % opts.rl_device)
    return Check("devices", OK, "sim_device %s, rl_device %s" % (opts.sim_device, opts.rl_device))


def task_bodies(obj: Optional[str]) -> Optional[Tuple[str, physx_budget.TaskBodies]]:
    """``(object, bodies)`` the memory check sizes for: the object's config, or without
    ``--object`` the object with the most collision shapes (the cylinder's 3 robots);
    None when no object config can be read."""
    sized = []
    for name in [obj] if obj else find_objects():
        try:
            sized.append((name, physx_budget.TaskBodies.of(object_facts(name))))
        except ConfigReadError:
            continue
    return max(sized, key=lambda pair: pair[1].shapes) if sized else None


def check_memory(opts: Options, facts: GpuFacts) -> Check:
    index = device_index(opts.sim_device)
    if index is None:
        return Check("gpu_memory", SKIP, "simulation on the CPU")
    dev = facts.device(index)
    if dev is None or dev.free_mb is None:
        return Check("gpu_memory", WARN, "free memory of %s unknown" % opts.sim_device,
                     "check nvidia-smi before starting %d envs" % opts.num_envs)
    free_bytes = int(dev.free_mb * physx_budget.MB)
    sized = task_bodies(opts.object)
    if sized is None:
        return Check("gpu_memory", WARN, "cannot size the PhysX contact buffer: no readable "
                     "task/<object>/config.py under %s" % mapush_root(),
                     "set MAPUSH_ROOT to a MAPush checkout at the pinned commit")
    obj, bodies = sized
    try:
        budget = physx_budget.plan(opts.num_envs, free_bytes, bodies)
    except MapushError as exc:
        return Check("gpu_memory", FAIL, str(exc), "fix or unset %s" % physx_budget.MULTIPLIER_ENV)
    need = physx_budget.run_memory_mb(opts.num_envs, budget)
    summary = ("%d envs of %s (%d robots) need ~%.0f MiB on %s (contact buffer: %s), %.0f MiB "
               "free" % (opts.num_envs, obj, bodies.robots, need, opts.sim_device,
                         budget.describe(), dev.free_mb))
    fewer = "lower --num-envs (try %d)" % max(1, int(opts.num_envs * dev.free_mb / need / 2))
    if not budget.fits or need > dev.free_mb:
        fix = fewer + ", free the GPU (nvidia-smi lists its processes)"
        if budget.source == "override":
            fix += ", or unset %s (or lower it) to let mapush size the PhysX contact buffer" \
                   % physx_budget.MULTIPLIER_ENV
        return Check("gpu_memory", FAIL, summary + ": not enough GPU memory; PhysX would run "
                     "out of memory (seen as a bare segfault, incident 000)", fix)
    if need > 0.9 * dev.free_mb:
        return Check("gpu_memory", WARN, summary + ": little headroom", fewer)
    return Check("gpu_memory", OK, summary)


# --- software checks ------------------------------------------------------------------

_ISAACGYM_PROBE = ("import isaacgym, os, sys; from isaacgym import gymapi; "
                   "print(os.path.dirname(os.path.abspath(isaacgym.__file__)))")


def probe_isaacgym(timeout: float = 120.0) -> Tuple[Optional[str], str]:
    """Import Isaac Gym in a fresh interpreter (torch not imported first): (package dir, error)."""
    if importlib.util.find_spec("isaacgym") is None:
        return None, "no module named isaacgym"
    try:
        proc = subprocess.run([sys.executable, "-c", _ISAACGYM_PROBE], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, str(exc)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or ["exit status %d" % proc.returncode]
        return None, lines[-1]
    return proc.stdout.strip().splitlines()[-1], ""


def check_isaacgym(_opts: Options, state: Dict[str, Any]) -> Check:
    pkg, error = probe_isaacgym()
    state["isaacgym_dir"] = pkg
    if pkg is None:
        fix = ("this container's image lacks it: on the host, put the tarball in vendor/ and "
               "rebuild with 'make build'" if in_container()
               else ISAACGYM_HINT.split(": ", 1)[-1])
        return Check("isaacgym", FAIL, "Isaac Gym is not importable (%s)" % error, fix)
    try:
        version = importlib.metadata.version("isaacgym")
    except importlib.metadata.PackageNotFoundError:  # on PYTHONPATH, without its metadata
        version = "(version unknown)"
    if "stand" in version:  # tests/standin's package (make try, make image-check): no PhysX
        return Check("isaacgym", WARN, "Isaac Gym is the tests' stand-in %s (no PhysX), from %s"
                     % (version, pkg), "nothing trained over it is a MAPush result: build "
                     "with NVIDIA's Isaac Gym Preview 4 tarball for real runs")
    return Check("isaacgym", OK, "Isaac Gym %s importable from %s" % (version, pkg))


def check_gymtorch(_opts: Options, state: Dict[str, Any]) -> Check:
    pkg = state.get("isaacgym_dir")
    if not pkg:
        return Check("gymtorch", SKIP, "Isaac Gym not importable")
    source = Path(pkg) / "_bindings" / "src" / "gymtorch"
    if not source.is_dir():
        return Check("gymtorch", OK, "this isaacgym has no gymtorch extension to build")
    # where torch.utils.cpp_extension.load builds: $TORCH_EXTENSIONS_DIR, else
    # $XDG_CACHE_HOME/torch_extensions/py38_cu116 (default cache ~/.cache)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    where = Path(os.environ.get("TORCH_EXTENSIONS_DIR") or Path(cache) / "torch_extensions")
    built = [path for pattern in ("gymtorch/gymtorch*.so", "*/gymtorch/gymtorch*.so")
             for path in sorted(where.glob(pattern))]
    if built:
        return Check("gymtorch", OK, "gymtorch built: %s" % built[0])
    tools = [t for t in ("ninja", "g++") if shutil.which(t) is None]
    fix = ("the image builds it once at build time ('make build'); outside the image set "
           "TORCH_EXTENSIONS_DIR to a persistent folder so it is compiled only once")
    if tools:
        return Check("gymtorch", FAIL, "gymtorch is not built in %s and %s missing, so it cannot "
                     "be compiled on first import" % (where, " and ".join(tools)), fix)
    return Check("gymtorch", WARN, "gymtorch is not built in %s: the first import compiles it "
                 "(about a minute)" % where, fix)


def check_patches(_opts: Options, _state: Dict[str, Any]) -> Check:
    records = {r.get("component"): r for r in patch_records()}
    # The mapush patches apply to the MAPush tree at $MAPUSH_ROOT; when mqe is loaded from
    # elsewhere on the path (not a checkout under MAPUSH_ROOT) there is no tree they apply to.
    root_has_mqe = (mapush_root() / "mqe" / "__init__.py").is_file()
    bad, notes = [], []
    for component in PATCH_COMPONENTS:
        record = records.get(component)
        if record is None and component == "mapush" and not root_has_mqe:
            notes.append("mapush: no record, and no MAPush tree at %s to patch (mqe comes from "
                         "the Python path)" % mapush_root())
        elif record is None:
            bad.append("%s: no record" % component)
        elif record.get("error") or record.get("status") not in ("applied", "already-applied") \
                or not record.get("patches"):
            bad.append("%s: %s" % (component, record.get("error") or "status %r"
                                   % record.get("status")))
    if bad:
        return Check("patches", FAIL, "patches not recorded as applied in %s (%s)"
                     % (patch_record_dir(), "; ".join(bad)),
                     "use the image ('make build' applies them with patches/apply), or run "
                     "'patches/apply COMPONENT DIR --record-dir DIR' and set MAPUSH_PATCH_RECORDS")
    found = [c for c in PATCH_COMPONENTS if c in records]
    names = sum(len(records[c].get("patches", [])) for c in found)
    message = "%d patches recorded for %s" % (names, ", ".join(found))
    if notes:
        return Check("patches", WARN, message + "; " + "; ".join(notes),
                     "point MAPUSH_ROOT at the patched MAPush checkout (the image: /opt/mapush)")
    return Check("patches", OK, message)


def check_mapush(opts: Options, _state: Dict[str, Any]) -> Check:
    root = mapush_root()
    fix = "set MAPUSH_ROOT to a MAPush checkout at the pinned commit (the image has /opt/mapush)"
    has_mqe = (root / "mqe" / "__init__.py").is_file() or importlib.util.find_spec("mqe") is not None
    if not has_mqe:
        return Check("mapush", FAIL, "MAPush's mqe package not found in %s nor on the Python path"
                     % root, fix)
    objects = find_objects(root)
    if not objects:
        return Check("mapush", FAIL, "no task/<object>/config.py under %s" % root, fix)
    if opts.object and opts.object not in objects:
        return Check("mapush", FAIL, "object %s not in %s (found: %s)"
                     % (opts.object, root / "task", ", ".join(objects)),
                     "use --object %s" % " or ".join(objects))
    return Check("mapush", OK, "MAPush at %s, objects: %s" % (root, ", ".join(objects)))


def check_rendering(opts: Options, facts: Optional[GpuFacts]) -> Check:
    """``--video``: MQE's camera renders through Vulkan (mapush/diagnostics/rendering.py)."""
    found = problems(in_container())
    if found:
        return Check("rendering", FAIL, "; ".join(what for what, _fix in found),
                     "; ".join(fix for _what, fix in found))
    names = [d.name for d in facts.devices] if facts is not None else []
    risky = datacenter_gpu(names)
    if risky:
        return Check("rendering", WARN, "%s: MAPush's README reports that rendering (the "
                     "video camera) segfaults on datacenter GPUs (A100/A800; H100 likewise "
                     "has no display engine)" % risky, FIXES["no_render"])
    return Check("rendering", OK, "Vulkan ICD found%s" % (
        ", graphics capability set" if in_container() else ""))


# --- running them -----------------------------------------------------------------------

def run_checks(opts: Options, facts: Optional[GpuFacts] = None,
               gather: Callable[[], GpuFacts] = gpu_facts.gather) -> Tuple[List[Check], Optional[GpuFacts]]:
    """All checks, in order. GPU facts are gathered (or taken from ``facts``) only when a
    device is a GPU; CPU-only runs skip the GPU checks."""
    checks = []  # type: List[Check]
    if opts.gpus:
        if facts is None:
            facts = gather()
        gpu_check = check_gpu_visible(opts, facts)
        checks.append(gpu_check)
        if gpu_check.status == FAIL and not facts.visible:
            checks += [Check(n, SKIP, "no GPU visible") for n in ("driver", "gpu_arch",
                                                                  "gpu_memory")]
        else:
            checks += [check_driver(opts, facts), check_arch(opts, facts),
                       check_memory(opts, facts)]
    else:
        checks += [Check(n, SKIP, "CPU-only run (--sim-device cpu --rl-device cpu)")
                   for n in ("gpu", "driver", "gpu_arch", "gpu_memory")]
    checks.append(check_devices(opts, facts))
    state = {}  # type: Dict[str, Any]
    for check in (check_isaacgym, check_gymtorch, check_patches, check_mapush):
        checks.append(check(opts, state))
    if opts.video:
        checks.append(check_rendering(opts, facts))
    if opts.check_step:
        checks.append(check_step(opts, facts, checks))
    return checks, facts


def check_step(opts: Options, facts: Optional[GpuFacts], checks: List[Check]) -> Check:
    """MQE's fast step against upstream's on this machine (mapush/diagnostics/step_check.py)."""
    blocking = [c.name for c in checks if c.status == FAIL]
    if blocking:
        return Check("step", SKIP, "not run: %s failed" % ", ".join(blocking))
    machine = step_check.machine(opts.sim_device, facts)
    print("doctor: checking MQE's fast step against upstream's on %s (three short "
          "simulations)..." % opts.sim_device, file=sys.stderr, flush=True)
    record = step_check.run(opts.sim_device, machine, opts.task, obj=opts.object or "cuboid",
                            envs=opts.check_step_envs, steps=opts.check_step_steps)
    if record.get("passed") is None:
        return Check("step", FAIL, step_check.line(record), "mapush doctor (the other checks) "
                     "says what is missing")
    if record["passed"]:
        return Check("step", OK, step_check.line(record))
    return Check("step", FAIL, step_check.line(record),
                 "train with upstream's step (PPO: --set mqe_fast_step=false; HARL: --set "
                 "env.mqe_fast_step=false) and report this line; the verdict is in %s"
                 % step_check.cache_file(record["key"]))


def failed(checks: List[Check]) -> List[Check]:
    return [c for c in checks if c.status == FAIL]


def report(checks: List[Check], facts: Optional[GpuFacts], opts: Options) -> Dict[str, Any]:
    return {"ok": not failed(checks), "options": asdict(opts),
            "checks": [asdict(c) for c in checks],
            "gpu": facts.to_dict() if facts is not None else None}


class PreflightError(MapushError):
    exit_code = 3


def preflight(spec: RunSpec) -> Tuple[List[Check], Optional[GpuFacts]]:
    """The doctor's checks for a run, and the GPU facts they read: warnings go to stderr, a
    failure raises :class:`PreflightError` (after the failing checks are printed)."""
    opts = Options(num_envs=spec.num_envs, sim_device=spec.sim_device, rl_device=spec.rl_device,
                   object=spec.object, video=spec.record_video)  # as eval --video checks
    checks, facts = run_checks(opts)
    for check in checks:
        if check.status in (WARN, FAIL):
            print("mapush: preflight " + check.line(), file=sys.stderr)
    bad = failed(checks)
    if bad:
        raise PreflightError("preflight failed: %s (details above; 'mapush doctor --num-envs %d' "
                             "rechecks; --no-preflight skips at your own risk)"
                             % (", ".join(c.name for c in bad), spec.num_envs))
    return checks, facts


def step_verdict(device: str, facts: Optional[GpuFacts], task: str) -> Dict[str, Any]:
    """This machine's verdict on MQE's fast step, for a new run on ``device`` (a GPU): the
    cached one, or, the first time for this GPU, driver, torch, image, patches and level
    (``task``), the check's (``mapush doctor --check-step``), run now while others wait."""
    machine = step_check.machine(device, facts)
    key, _what = step_check.machine_key(machine, task)
    with step_check.held(key):
        record = step_check.cached(key)
        if record is None:
            print("mapush: the first run on this GPU with this stack: checking MQE's fast step "
                  "against upstream's once (three short simulations; `mapush doctor "
                  "--check-step` reruns it)...", file=sys.stderr, flush=True)
            record = step_check.run(device, machine, task)
    return dict(record, cache=str(step_check.cache_file(key)))


def main(args: Any) -> int:
    # the doctor's options as given; what a caller's namespace lacks keeps Options' default
    opts = Options(**{f.name: getattr(args, f.name) for f in fields(Options)
                      if hasattr(args, f.name)})
    checks, facts = run_checks(opts)
    if getattr(args, "json", False):
        print(json.dumps(report(checks, facts, opts), indent=2, sort_keys=True, default=str))
    else:
        for check in checks:
            print(check.line())
        bad = failed(checks)
        print("doctor: %s" % ("all checks passed" if not bad else "%d check(s) failed: %s"
                              % (len(bad), ", ".join(c.name for c in bad))))
    return 1 if failed(checks) else 0
