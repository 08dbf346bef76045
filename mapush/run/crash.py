"""Turn a dead training child into a diagnosis: where it died, and what to do about it.

How it works: docs/architecture.md, "Modules"."""
import json
import signal
import sys
from pathlib import Path

from mapush.proc import signal_name
from mapush.common.phases import read_phases
from mapush.diagnostics.gpu import free_mb_now
from mapush.diagnostics.physx_budget import BUDGET_FILE
from mapush.spec import RunSpec

PHASE_LOG = "phases.log"  # the phases the child reached (mapush.common.phases)

_OOM_FIX = ("lower --num-envs; leave MAPUSH_CONTACT_PAIRS_MULTIPLIER unset so mapush sizes the "
            "PhysX contact buffer (or lower it); check 'mapush doctor --num-envs N'")
_OTHER_PROCS = ("another process holds GPU memory",
                "nvidia-smi lists the processes on the GPU; stop them or pick another GPU "
                "(--sim-device/--rl-device cuda:N)")
_ARCH = ("the GPU is newer than this Isaac Gym/torch build (H100/H200 sm_90 with the cu116 "
         "build segfaults after '+++ Using GPU PhysX')",
         "'mapush doctor' checks the architecture and names the supported way out")
_GRAPHICS = ("Vulkan/EGL for rendering (--record-video) is missing in the container",
             "run with NVIDIA_DRIVER_CAPABILITIES=all (the image sets it) or without "
             "--record-video")

# Likely causes by the phase the child reached, most likely first: (cause, fix).
CAUSES = {
    "start": [("Isaac Gym or torch failed to load (a broken install, or gymtorch compiled "
               "for another torch)", "run 'mapush doctor'; rebuild the image ('make build')"),
              ("out of host memory", "check 'dmesg' for the OOM killer; lower --num-envs")],
    "create_sim": [("PhysX GPU buffers do not fit in GPU memory (contact buffer too large)",
                    _OOM_FIX), _OTHER_PROCS, _ARCH, _GRAPHICS],
    "terrain": [("PhysX ran out of GPU memory while allocating the terrain mesh after its "
                 "contact buffer (incident 000)", _OOM_FIX), _OTHER_PROCS, _ARCH],
    "envs": [("PhysX ran out of GPU memory while creating the envs", _OOM_FIX), _OTHER_PROCS,
             _ARCH],
    "prepare_sim": [("PhysX ran out of GPU memory allocating the GPU pipeline's state tensors",
                     _OOM_FIX), _OTHER_PROCS, _ARCH],
    "first_step": [("PhysX ran out of GPU memory on the first simulation step (contact "
                    "generation)", _OOM_FIX),
                   ("tensors on two GPUs: --sim-device and --rl-device differ (incident 003)",
                    "use the same GPU for both"), _ARCH],
    "training": [("GPU memory ran out during training (a leak grows memory/gpu_allocated_mb "
                  "in TensorBoard; the watchdog warns about steady growth)",
                  "look for the watchdog's warning above; lower --num-envs; resume with "
                  "--resume RUN_DIR from the last checkpoint"),
                 ("PhysX contact buffer overflow or unstable physics", _OOM_FIX),
                 ("tensors on two GPUs: --sim-device and --rl-device differ (incident 003)",
                  "use the same GPU for both")],
    "checkpoint": [("killed while writing a checkpoint; the previous checkpoint is intact "
                    "(checkpoints are written atomically)",
                    "resume with --resume RUN_DIR; give the disk space and time to save")],
    "shutdown": [("Isaac Gym's teardown at exit (incident 002); training had finished and its "
                  "checkpoints were written", "nothing to redo: the run directory is complete; "
                  "report it if it repeats, the child should leave with os._exit")],
}
_SIGKILL_CAUSE = ("killed with SIGKILL: the host's OOM killer (out of host memory) or a stop "
                  "that did not finish within Docker's stop_grace_period",
                  "check 'dmesg' / 'docker inspect' (OOMKilled); lower --num-envs; raise "
                  "stop_grace_period in compose")


def report_crash(spec: RunSpec, signum: int) -> int:
    """Print the diagnosis of a child killed by ``signum``; return the exit status
    (128 + signum). The last line on stderr is the one-line diagnosis."""
    run_dir = Path(spec.run_dir)
    reached = read_phases(str(run_dir / PHASE_LOG))
    phase = (reached or ["start"])[-1]
    name = signal_name(signum)
    try:
        free = free_mb_now(spec.sim_device)
    except Exception:  # noqa: BLE001 - a diagnosis must not crash
        free = None
    free_text = ("%.0f MiB free on %s now" % (free, spec.sim_device) if free is not None
                 else "GPU memory free unknown (%s)" % (
                     "CPU simulation" if not str(spec.sim_device).startswith("cuda")
                     else "nvidia-smi unavailable"))
    causes = ([_SIGKILL_CAUSE] if signum == signal.SIGKILL else []) + \
        CAUSES.get(phase, CAUSES["training"])
    err = sys.stderr
    print("", file=err)
    print("mapush: the training process died from %s in phase '%s'" % (name, phase), file=err)
    print("mapush: %s" % free_text, file=err)
    try:
        budget = json.loads((run_dir / BUDGET_FILE).read_text())
        print("mapush: the child chose max_gpu_contact_pairs=%s (%.0f MiB, %s) with %s free on %s"
              % (budget.get("pairs"), budget.get("bytes", 0) / 1048576.0, budget.get("source"),
                 "%.0f MiB" % (budget["free_bytes"] / 1048576.0) if budget.get("free_bytes")
                 else "unknown memory", budget.get("device")), file=err)
    except (OSError, ValueError):
        pass  # no budget recorded: the sim never sized one
    print("mapush: likely causes, most likely first:", file=err)
    for number, (cause, fix) in enumerate(causes, 1):
        print("  %d. %s\n     fix: %s" % (number, cause, fix), file=err)
    print("mapush: phases reached: %s (%s)" % (", ".join(reached) or "none",
                                              run_dir / PHASE_LOG), file=err)
    print("error: training died from %s in phase %s (%s); most likely %s: %s"
          % (name, phase, free_text, causes[0][0], causes[0][1]), file=err, flush=True)
    return 128 + signum


# Exceptions raised in the child: (substring of the message, diagnosis and fix).
_EXCEPTION_HINTS = (
    ("device-side assert", "a CUDA device-side assert (reported asynchronously: the traceback "
     "may point at a later, innocent line); rerun with CUDA_LAUNCH_BLOCKING=1 (and "
     "TORCH_USE_CUDA_DSA=1 on torch >= 2.0) to see the failing operation; typical causes: an "
     "index out of range, NaN actions, tensors of two GPUs (--sim-device and --rl-device "
     "differ, incident 003)"),
    ("out of memory", "CUDA out of memory: lower --num-envs, leave "
     "MAPUSH_CONTACT_PAIRS_MULTIPLIER unset, free the GPU (nvidia-smi), check 'mapush doctor "
     "--num-envs N'; if memory grew during training see the watchdog's warning"),
    ("no kernel image is available", "torch has no kernels for this GPU's architecture: run "
     "'mapush doctor', which names the supported way out"),
    ("expected all tensors to be on the same device", "tensors on two devices: use the same "
     "--sim-device and --rl-device"),
    ("driver version is insufficient", "the NVIDIA driver is too old for CUDA 11.6: install "
     ">= 450.80.02 (see 'mapush doctor')"),
    ("ninja is required", "gymtorch must be compiled and ninja is missing: use the image "
     "('make build' builds gymtorch once)"),
    ("error building extension 'gymtorch'", "gymtorch failed to compile: use the image "
     "('make build' builds it once), or check g++/ninja and TORCH_EXTENSIONS_DIR"),
)


def diagnose_exception(exc: BaseException) -> str:
    """The one-line ``error:`` diagnosis of an exception that ended the child."""
    text = str(exc)
    first = text.strip().splitlines()[0] if text.strip() else ""
    lowered = text.lower()
    if isinstance(exc, KeyboardInterrupt):
        return "error: interrupted before the stop handlers were installed"
    for needle, hint in _EXCEPTION_HINTS:
        if needle in lowered:
            return "error: training failed: %s: %s -- %s" % (type(exc).__name__, first, hint)
    return "error: training failed: %s: %s" % (type(exc).__name__, first)
