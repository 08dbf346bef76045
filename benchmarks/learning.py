"""Does training learn over the stand-in (#48)? ``mapush train`` over MAPush's real MQE (the
patched tree, as the image has it) and the Isaac Gym stand-in (its physics: robots walk where
commanded, contact in the plane), on one GPU; the success rate per update (the run's
``progress.txt``) and the losses and rewards per update (``log.txt``) into ``learning.json``.

    python benchmarks/learning.py --src MAPUSH_SRC --site SITE --records RECORDS --out DIR \
        [--algo ppo] [--object cuboid] [--num-envs 500] [--steps 6000000] [--device cuda:0]
        [--object-config FILE] [--run DIR]   # a run already in DIR is resumed (mapush train
                                             # --resume): a long run over several calls

SITE is the patched OpenRL/HARL site MQE imports (benchmarks/README.md, "Reproduce");
RECORDS the patch records that preflight checks. Not PhysX: a figure from this script is a
figure over the stand-in, and says so in its file.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STANDIN = REPO / "tests" / "standin"
UPDATE = re.compile(r"step (\d+): (.*)")


def prepare(src: str, dest: Path, pristine: bool = False) -> None:
    if not dest.exists():
        subprocess.run([sys.executable, str(STANDIN / "prepare_tree.py"), src, str(dest)]
                       + (["--pristine"] if pristine else []),
                       check=True, stdout=subprocess.DEVNULL)


def child_env(site: str, tree: Path, records_from: str, records: Path,
              standin: str = str(STANDIN)) -> dict:
    """The environment of a child over the prepared ``tree`` and ``standin``: ``site``'s
    packages first; the patch records preflight reads (``records_from``'s, OpenRL's and
    HARL's, with the tree's own) copied into ``records``."""
    records.mkdir(exist_ok=True)
    for record in list(Path(records_from).glob("*.json")) + \
            list((tree / ".mapush-patches").glob("*.json")):
        part = records / (".%s.%d" % (record.name, os.getpid()))
        shutil.copy(str(record), str(part))  # then renamed: two runs at once may share records
        os.replace(str(part), str(records / record.name))
    return dict(os.environ, PYTHONWARNINGS="ignore", PYTHONUNBUFFERED="1",
                PYTHONPATH=os.pathsep.join([site, standin, str(tree), str(REPO)]
                                           + [p for p in [os.environ.get("PYTHONPATH")] if p]),
                MAPUSH_ROOT=str(tree), MAPUSH_PATCH_RECORDS=str(records),
                TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")


def curves(run: Path) -> dict:
    """Success per update (progress.txt: step,success,fps) and each update's tags."""
    success = []
    for line in (run / "progress.txt").read_text().splitlines()[1:]:
        step, value, fps = line.split(",")
        success.append([int(step), float(value) if value else None, float(fps)])
    updates = []
    log = run / "log.txt"
    for line in (log.read_text().splitlines() if log.is_file() else []):
        match = UPDATE.search(line)
        if match:
            tags = dict(pair.split("=", 1) for pair in match.group(2).split())
            updates.append({"step": int(match.group(1)),
                            **{k: float(v) for k, v in tags.items()}})
    return {"success": success, "updates": updates}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--src", required=True)
    parser.add_argument("--site", required=True)
    parser.add_argument("--records", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--algo", default="ppo")
    parser.add_argument("--task", default="go1push_mid")
    parser.add_argument("--object", default="cuboid")
    parser.add_argument("--num-envs", type=int, default=500)
    parser.add_argument("--steps", type=int, default=6000000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--gpus", help="one run across these GPUs (mapush train --gpus)")
    parser.add_argument("--stop-after", type=int, default=0, metavar="UPDATES",
                        help="send the run SIGTERM once it logged UPDATES updates")
    parser.add_argument("--timeout", type=float, default=540.0)
    parser.add_argument("--object-config", help="e.g. the authors' results/<run>/task/config.py"
                        " (relative: to the prepared tree)")
    parser.add_argument("--checkpoint-interval", type=int, default=2000000)
    parser.add_argument("--run", help="the run directory (default OUT/run); resumed if there")
    parser.add_argument("--config", help="the trainer's --config YAML (e.g. device_rollout: "
                        "false for an OpenRL without patch 03)")
    parser.add_argument("--standin-times", metavar="FILE", help="time the stand-in's calls "
                        "into FILE (tests/standin/isaacgym/timing.py)")
    parser.add_argument("--pristine", action="store_true",
                        help="MQE as upstream ships it (no patch of ours; run without preflight,"
                        " which checks our patches): the baseline of an end-to-end comparison")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tree = Path("/tmp/learning-tree%s/MAPush" % ("-pristine" if args.pristine else ""))
    prepare(args.src, tree, args.pristine)
    env = child_env(args.site, tree, args.records, Path("/tmp/learning-records"))
    if args.standin_times:
        env["ISAACGYM_STANDIN_TIMES"] = str(Path(args.standin_times).resolve())
    run = Path(args.run) if args.run else out / "run"
    if (run / "config.json").is_file():
        cmd = [sys.executable, "-m", "mapush", "train", "--resume", str(run)]
    else:
        cmd = [sys.executable, "-m", "mapush", "train", "--algo", args.algo, "--task", args.task,
               "--object", args.object, "--num-envs", str(args.num_envs), "--steps",
               str(args.steps), "--seed", str(args.seed), "--sim-device", args.device, "--rl-device",
               args.device, "--checkpoint-interval", str(args.checkpoint_interval),
               "--run-dir", str(run)]
        if args.gpus:
            cmd += ["--gpus", args.gpus]
        if args.object_config:
            cmd += ["--object-config", str(tree / args.object_config)]
        if args.config:
            cmd += ["--config", args.config]
        if args.pristine:
            cmd += ["--no-preflight"]
    started = time.time()
    if args.stop_after:  # SIGTERM once the run has logged this many updates (Ctrl-C's way)
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        progress = run / "progress.txt"
        while proc.poll() is None and time.time() < started + args.timeout and not (
                progress.is_file() and len(progress.read_text().splitlines()) >= args.stop_after):
            time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=120)[0]
        code, tail = proc.returncode, out[-3000:]
    else:
        try:
            proc = subprocess.run(cmd, env=env, timeout=args.timeout, capture_output=True,
                                  text=True)
            code, tail = proc.returncode, (proc.stdout + proc.stderr)[-3000:]
        except subprocess.TimeoutExpired as exc:  # what it logged so far still counts
            code, tail = None, str(exc.stdout or "")[-3000:]
    result = {"what": "mapush train over real MQE and the Isaac Gym stand-in (not PhysX)",
              "algo": args.algo, "object": args.object, "num_envs": args.num_envs,
              "steps": args.steps, "seed": args.seed, "device": args.device, "gpus": args.gpus,
              "object_config": args.object_config, "command": cmd[3:],
              "mqe": "pristine (upstream)" if args.pristine else "patched",
              "seconds": round(time.time() - started, 1), "returncode": code,
              "tail": tail[-1500:],
              "checkpoints": sorted(p.name for p in (run / "checkpoints").glob("*"))
              if (run / "checkpoints").is_dir() else []}
    if (run / "progress.txt").is_file():
        result.update(curves(run))
    (out / "learning.json").write_text(json.dumps(result, indent=1) + "\n")
    print(tail[-1500:])
    print("learning: %d updates, success %s" % (
        len(result.get("success", [])),
        [row[1] for row in result.get("success", [])][-5:]))
    return 0 if code in (0, None) else 1


if __name__ == "__main__":
    sys.exit(main())
