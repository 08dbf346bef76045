"""Benchmark of our adapter layer: ``python benchmarks/run.py [--quick] [options]``.

Runs (a) adapter cost per step, (b) training-loop throughput and layer share, (c) memory
over many steps and (d) time from ``mapush train`` to the first update, then writes
``<out>/<tag>.json`` and ``<out>/<tag>.md``. ``--quick`` is the CPU smoke of ``make bench``:
tiny sizes, a few seconds per section. Exits 1 when any variant or run failed (a missed
target is no failure). See benchmarks/README.md for the method.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

SECTIONS = ("adapters", "memory", "profile", "train", "startup")
FULL = {"sizes": "200,500,2000,4096", "reps": 7, "steps": 200, "warmup": 50,
        "mem_envs": 500, "mem_steps": 20000, "mem_warmup": 1000,
        "train_sizes": "200,500,2000,4096", "train_algos": "happo,ppo", "train_updates": 4,
        "train_physics_sizes": "500", "train_physics_us": 2000.0, "profile_steps": 256,
        "startup_envs": 500, "startup_algos": "happo,ppo"}
QUICK = {"sizes": "8,32", "reps": 3, "steps": 20, "warmup": 5,
         "mem_envs": 16, "mem_steps": 400, "mem_warmup": 50,
         "train_sizes": "8", "train_algos": "happo,ppo", "train_updates": 2,
         "train_physics_sizes": "", "train_physics_us": 0.0, "profile_steps": 20,
         "startup_envs": 8, "startup_algos": "happo"}
# env steps per update per env, as the shipped trainer configs set them
EPISODE_LENGTH = {"happo": 200, "mappo": 200, "hatrpo": 200, "ppo": 200}


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="CPU smoke at tiny sizes (make bench)")
    p.add_argument("--device", help="cuda:0 (default when CUDA is there) or cpu")
    p.add_argument("--sections", default=",".join(SECTIONS))
    p.add_argument("--sizes")
    p.add_argument("--reps", type=int)
    p.add_argument("--steps", type=int)
    p.add_argument("--warmup", type=int)
    p.add_argument("--mem-envs", type=int)
    p.add_argument("--mem-steps", type=int)
    p.add_argument("--mem-warmup", type=int)
    p.add_argument("--train-sizes")
    p.add_argument("--train-algos")
    p.add_argument("--train-updates", type=int)
    p.add_argument("--train-physics-sizes",
                   help="sizes of extra training runs with --train-physics-us")
    p.add_argument("--train-physics-us", type=float,
                   help="device busy-wait per step (a stand-in for PhysX) of those runs")
    p.add_argument("--profile-steps", type=int,
                   help="steps under torch.profiler (256: one fold of EpisodeStats)")
    p.add_argument("--train-timeout", type=float, default=420.0,
                   help="seconds a training run may take before it is recorded as failed")
    p.add_argument("--startup-envs", type=int)
    p.add_argument("--startup-algos")
    p.add_argument("--physics-us", type=float, default=0.0,
                   help="device busy-wait per double step standing in for PhysX (default 0)")
    p.add_argument("--site", help="dir with patched openrl/ and harl/ (default: built from "
                                  "tests/upstream.py when the venv has the sources)")
    p.add_argument("--records", help="patch records dir for MAPUSH_PATCH_RECORDS")
    p.add_argument("--out", help="result dir (default benchmarks/results, or a temp dir "
                                 "with --quick)")
    p.add_argument("--tag", help="result file name (default <gpu|cpu>-<date>)")
    p.add_argument("--logs-tar", help="also pack the per-run logs into this .tgz")
    args = p.parse_args(argv)
    defaults = QUICK if args.quick else FULL
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    bad = [s for s in args.sections.split(",") if s not in SECTIONS]
    if bad:
        p.exit(2, "error: --sections %s: unknown; choose from %s\n"
               % (",".join(bad), ",".join(SECTIONS)))
    return args


def ints(text):
    return [int(x) for x in str(text).split(",") if x]


def environment(device):
    import numpy
    import torch

    info = {"python": platform.python_version(), "torch": torch.__version__,
            "torch_cuda": torch.version.cuda, "numpy": numpy.__version__,
            "device": str(device), "host": platform.node(), "cpu_count": os.cpu_count(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    if str(device).startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        info.update(gpu=props.name, gpu_memory_mb=props.total_memory // 2 ** 20,
                    sm_count=props.multi_processor_count,
                    capability="%d.%d" % (props.major, props.minor))
        try:
            smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                                  "--format=csv,noheader"], capture_output=True, text=True,
                                 timeout=30).stdout.strip()
            info["driver"] = smi.split(",")[-1].strip() if smi else None
        except (OSError, subprocess.SubprocessError):
            info["driver"] = None
    try:
        proc = subprocess.run(["git", "rev-parse", "--verify", "HEAD"], cwd=str(REPO),
                              capture_output=True, text=True, timeout=10)
        info["commit"] = proc.stdout.strip() if proc.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        info["commit"] = None
    info["commit"] = os.environ.get("BENCH_COMMIT") or info["commit"]
    for name in ("openrl", "harl", "gym", "gymnasium"):
        info[name] = _version(name)
    return info


def _version(name):
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:  # noqa: BLE001
        return None


def upstream_info(site, records):
    """openrl's version and the patches applied to the carried upstream site."""
    import re

    out = {}
    try:
        text = (Path(site) / "openrl" / "__init__.py").read_text()
        match = re.search(r"__VERSION__\s*=\s*[\'\"]([^\'\"]+)", text)
        out["openrl"] = match.group(1) if match else None
    except (OSError, TypeError):
        out["openrl"] = None
    for comp in ("openrl", "harl"):
        try:
            rec = json.loads((Path(records) / (comp + ".json")).read_text())
            out[comp + "_patches"] = [p.get("name") for p in rec.get("patches") or []]
        except (OSError, TypeError, ValueError):
            out[comp + "_patches"] = None
    return out


def site_dirs(args, scratch):
    """The patched upstream site: given, or built from tests/upstream.py if possible."""
    if args.site:
        return args.site, args.records
    try:
        from tests.upstream import build_patched_site

        built = build_patched_site(Path(scratch) / "upstream")
        return str(built["site"]), str(built["records"])
    except Exception as exc:  # noqa: BLE001
        print("bench: no patched upstream site (%s); training sections will fail" % exc,
              file=sys.stderr)
        return None, None


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child-train":
        from benchmarks.train_bench import child_train

        algo, n, steps, device, out, length = argv[1:7]
        child_train(algo, int(n), int(steps), device, out, int(length))
        sys.stdout.flush()
        os._exit(0)  # trainers' threads (TensorBoard writers) must not hold the exit

    args = parse(argv)
    import torch

    from benchmarks import measure, report, train_bench

    device = args.device or ("cuda:0" if torch.cuda.is_available() and not args.quick
                             else "cpu")
    sections = args.sections.split(",")
    info = environment(device)
    tag = args.tag or "%s-%s" % ("quick-cpu" if args.quick else
                                 ("gpu" if device.startswith("cuda") else "cpu"),
                                 time.strftime("%Y%m%d-%H%M%S"))
    out_dir = Path(args.out) if args.out else (
        Path(tempfile.gettempdir()) / "mapush-bench" if args.quick
        else REPO / "benchmarks" / "results")
    out_dir.mkdir(parents=True, exist_ok=True)
    logs = Path(tempfile.mkdtemp(prefix="bench-logs-"))
    result = {"environment": info, "command": [sys.executable] + sys.argv,
              # how the run was asked for (gpu_run.sh passes the device call on)
              "produced_by": os.environ.get("BENCH_CALL"),
              "settings": {k: v for k, v in vars(args).items()}, "sections": {}}

    def save():
        (out_dir / (tag + ".json")).write_text(json.dumps(result, indent=1))
        (out_dir / (tag + ".md")).write_text(report.markdown(result))

    def stamp(name, started):
        result["sections"].setdefault("seconds", {})[name] = round(time.time() - started, 1)
        save()
        print("bench: %s done in %.1fs" % (name, time.time() - started), file=sys.stderr)

    if "adapters" in sections:
        t = time.time()
        result["sections"]["adapters"] = measure.adapter_cost(
            ints(args.sizes), device, args.reps, args.steps, args.warmup, args.physics_us)
        stamp("adapters", t)
    if "memory" in sections:
        t = time.time()
        result["sections"]["memory"] = measure.memory(
            args.mem_envs, device, args.mem_steps, args.mem_warmup,
            physics_us=args.physics_us)
        stamp("memory", t)
    if "profile" in sections:
        t = time.time()
        result["sections"]["profile"] = measure.profile(args.mem_envs, device,
                                                        steps=args.profile_steps,
                                                        physics_us=args.physics_us)
        stamp("profile", t)
    if "train" in sections or "startup" in sections:
        site, records = site_dirs(args, logs)
        result["settings"]["site"], result["settings"]["records"] = site, records
        info["upstream"] = upstream_info(site, records)
    if "train" in sections:
        t = time.time()
        runs = []
        algos = args.train_algos.split(",")
        plan = [(algo, n, args.physics_us) for algo in algos for n in ints(args.train_sizes)]
        if args.train_physics_us:
            plan += [(algo, n, args.train_physics_us) for algo in algos
                     for n in ints(args.train_physics_sizes)]
        for algo, n, physics in plan:
            steps = EPISODE_LENGTH[algo] * n * args.train_updates
            runs.append(train_bench.run_train(algo, n, steps, device, site, records, logs,
                                              timeout=args.train_timeout, physics_us=physics,
                                              episode_length=EPISODE_LENGTH[algo]))
            result["sections"]["train"] = {"runs": runs}
            save()
        stamp("train", t)
    if "startup" in sections:
        t = time.time()
        runs = []
        for algo in args.startup_algos.split(","):
            n = args.startup_envs
            runs.append(train_bench.startup(algo, n, EPISODE_LENGTH[algo] * n, device, site,
                                            records, logs))
        result["sections"]["startup"] = {"runs": runs}
        stamp("startup", t)
    result["logs"] = str(logs)
    save()
    if args.logs_tar:
        import tarfile

        with tarfile.open(args.logs_tar, "w:gz") as tar:
            tar.add(str(logs), arcname="logs")
    print(report.markdown(result))
    print("bench: wrote %s.{json,md}" % (out_dir / tag), file=sys.stderr)
    failed = report.failures(result)
    for line in failed:
        print("bench: FAILED %s" % line, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
