#!/usr/bin/env python3
"""``make try``: MAPush's whole method on a CPU in minutes, over the tests' Isaac Gym stand-in.

It runs ``mapush pipeline`` (a short mid level, every checkpoint evaluated, the high level
trained over the best one and evaluated with RRT) and ``mapush report`` of both runs, with
MAPush's real MQE over ``tests/standin`` (a planar MuJoCo world, no PhysX): a tour of the
commands and of what a run writes, without a GPU, Docker or the Isaac Gym tarball. Nothing
it shows is a result of MAPush: each run records Isaac Gym ``0+stand-in`` in its
config.json, and each report carries a banner that says so.

usage: python tests/standin/try.py [--dir runs/try] [--no-open] [--device cuda:0]
       python tests/standin/try.py --cmd "mapush train --set task.env.episode_length_s=10"

Needs the test venv (``make venv``) and MAPush at the pin (``MAPUSH_SRC``; ``make try``
fetches it into build/ as ``make test`` does). The prepared tree and the patched OpenRL and
HARL (rebuilt when a patch changes) are kept in build/try/; ``--cmd`` runs any ``mapush``
command over them instead of the tour (``make try CMD=...``). The
runs go to ``--dir``, and a second ``make try`` with the same folder resumes or skips what
is done (the pipeline's record). Exit status: the pipeline's, then the reports'; 2 for bad
input."""
import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import webbrowser
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO))
from tests.upstream import build_patched_site  # noqa: E402

# A mid level that shows learning in minutes on two cores (#80 item 2): 40 PPO updates of
# 200 steps an env, a point each in its report (32 envs, the default: 256,000 env steps,
# about 3 minutes), with the learning test's recipe (tests/test_real_mqe_learning.py): 5 s
# episodes, the target 1.2-1.6 m from the box, and the reward scales of the authors' training
# config (results/10-15-23_cuboid/task/config.py: MQE's default ones times 20,000, with the
# expanded OCB reward), under which push_reward rises from 0 to about 5 in those steps; with
# MQE's default scales it rose and fell back in a measured run (benchmarks/README.md, "make
# try's curve"). The high level: 2 short updates, 30 s episodes. All recorded in each run's
# spec.
MID = {"log_interval": 1}
MID_UPDATES, MID_ROLLOUT = 40, 200
UPPER = {"episode_length": 10, "ppo_epoch": 1}
AUTHORS_SCALES = {"target_reward_scale": 65, "approach_reward_scale": 15,
                  "collision_punishment_scale": -50, "push_reward_scale": 30,
                  "ocb_reward_scale": 80, "reach_target_reward_scale": 200000,
                  "exception_punishment_scale": -100000}
MID_SETS = ["task.env.episode_length_s=5", "task.goal.random_goal_distance_from_init=[1.2,1.6]",
            "task.rewards.expanded_ocb_reward=True"] + [
    "task.rewards.scales.%s=%s" % item for item in sorted(AUTHORS_SCALES.items())]
UPPER_SETS = ["task.env.episode_length_s=30"]


def pipeline_options(envs, device="cpu", updates=MID_UPDATES):
    """``mapush pipeline``'s options (docs/cli.md) for ``envs`` envs a level and ``updates``
    updates of the mid level."""
    return ["--object", "cuboid", "--num-envs", envs, "--upper-num-envs", envs, "--mid-steps",
            envs * MID_ROLLOUT * updates, "--upper-steps",
            envs * UPPER["episode_length"] * 2, "--eval-envs", envs, "--sim-device", device,
            "--rl-device", device] + [a for item in MID_SETS for a in ("--set", item)] + [
                a for item in UPPER_SETS for a in ("--upper-set", item)]


BANNER = ("make try: over the tests' Isaac Gym stand-in (tests/standin: MAPush's real MQE in "
          "a planar MuJoCo world, no PhysX). It shows that the method runs, not how well: no "
          "number it prints is a result of MAPush.")


def fail(message):
    print("error: %s" % message, file=sys.stderr)
    return 2


def run(argv, env):
    """A child in the foreground: Ctrl-C reaches it (same process group) and it stops with
    a checkpoint; then this returns its status."""
    proc = subprocess.Popen([str(a) for a in argv], env=env)
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:
            continue


def site_stamp():
    """The sha256 of the patches and the pins: a kept site built from others is rebuilt."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted((REPO / "patches").rglob("*")) + [REPO / "env" / "pins.env"]:
        if path.is_file():
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def patched_site(work):
    """OpenRL and HARL patched as the image patches them, in ``work``/upstream: built once,
    and again when a patch, or what it patches, changes (a stamp of their hashes)."""
    base = Path(work) / "upstream"
    stamp = base / ".stamp"
    if not (stamp.is_file() and stamp.read_text() == site_stamp()):
        print("make try: patching OpenRL and HARL into %s (once; again when a patch changes)"
              % base, file=sys.stderr, flush=True)
        shutil.rmtree(str(base), ignore_errors=True)
        build_patched_site(base)
        stamp.write_text(site_stamp())
    return {"site": base / "site", "records": base / "records"}


def command(words, device):
    """``mapush ARGS`` as this Python runs it, on ``device`` unless ARGS name one (where
    the command takes --sim-device)."""
    from mapush.cli import build_parser

    if not words or words[0] != "mapush":
        raise SystemExit(fail("CMD %r: give a mapush command, e.g. CMD=\"mapush train "
                              "--steps 4000\"" % " ".join(words)))
    sub = build_parser().commands.get(words[1] if len(words) > 1 else "")  # type: ignore
    takes = sub is not None and any("--sim-device" in a.option_strings for a in sub._actions)
    given = any(w.split("=")[0] in ("--sim-device", "--rl-device") for w in words)
    return [sys.executable, "-m", "mapush"] + words[1:] + (
        ["--sim-device", device, "--rl-device", device] if takes and not given else [])


def environment(tree, site, records):
    """The contract of tests/standin/prepare_tree.py, as tests/conftest.py's real_env."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(str(p) for p in (
        site, HERE, tree, REPO, os.environ.get("PYTHONPATH", "")) if p),
                MAPUSH_ROOT=str(tree), MAPUSH_PATCH_RECORDS=str(records), PYTHONUNBUFFERED="1",
                CUDA_VISIBLE_DEVICES="")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default="runs/try", help="where the runs go (default: %(default)s)")
    parser.add_argument("--envs", type=int, default=32, help="envs a level (default: %(default)s)")
    parser.add_argument("--work", default=str(REPO / "build" / "try"),
                        help="where the prepared MAPush tree is kept (default: %(default)s)")
    parser.add_argument("--mid-updates", type=int, default=MID_UPDATES,
                        help="PPO updates of the mid level, a point each on its curve "
                        "(default: %(default)s)")
    parser.add_argument("--no-open", action="store_true", help="do not open the report")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda:0: the tour on a GPU "
                        "(default: %(default)s)")
    parser.add_argument("--cmd", default="", help="instead of the tour, this mapush command "
                        "over the stand-in, e.g. \"mapush train --steps 4000\" (on --device "
                        "unless it names one)")
    args = parser.parse_args(argv)
    src = os.environ.get("MAPUSH_SRC")
    if not src or not Path(src, "mqe").is_dir():
        return fail("no MAPush tree at the pin (%s): set MAPUSH_SRC to a MAPush checkout at the "
                    "commit in env/pins.env, or let make try fetch it (it needs the network)"
                    % (os.environ.get("MAPUSH_SRC_MISSING") or "MAPUSH_SRC=%s" % (src or "")))
    out = Path(args.dir)
    if args.cmd:
        try:
            cmd = command(shlex.split(args.cmd), args.device)
        except ValueError as exc:
            return fail("CMD %r: %s; quote it as a shell would" % (args.cmd, exc))
    elif out.exists() and not (out / "pipeline.json").is_file():
        return fail("--dir %s exists and holds no make try of before (no pipeline.json); pass "
                    "another --dir: make try writes only into its own folder" % out)
    print(BANNER, file=sys.stderr, flush=True)
    if args.envs < 1:
        return fail("--envs %d: give 1 or more" % args.envs)
    if args.mid_updates < 1:
        return fail("--mid-updates %d: give 1 or more" % args.mid_updates)
    tree = Path(args.work) / "MAPush"
    prepared = subprocess.run([sys.executable, str(HERE / "prepare_tree.py"), src, str(tree)])
    if prepared.returncode != 0:
        return fail("could not prepare the MAPush tree in %s (above)" % tree)
    site = patched_site(args.work)
    with tempfile.TemporaryDirectory(prefix="mapush-try-") as tmp:
        records = Path(tmp) / "records-all"
        records.mkdir()
        for record in list(site["records"].glob("*.json")) + \
                list((tree / ".mapush-patches").glob("*.json")):
            shutil.copyfile(str(record), str(records / record.name))
        env = environment(tree, site["site"], records)
        if args.device != "cpu":
            env.pop("CUDA_VISIBLE_DEVICES")
        if args.cmd:
            code = run(cmd, env)
            print(BANNER, file=sys.stderr)
            return code
        configs = []
        for name, values in (("mid", MID), ("upper", UPPER)):
            path = Path(args.work) / ("%s.yaml" % name)  # kept: the pipeline records its path
            path.write_text("".join("%s: %s\n" % item for item in values.items()))
            configs.append(path)
        code = run([sys.executable, "-m", "mapush", "pipeline"] + pipeline_options(
            args.envs, args.device, args.mid_updates) +
                   ["--config", configs[0], "--upper-config", configs[1], "--dir", out], env)
        if code != 0:
            return code
        for level in ("mid", "upper"):
            code = run([sys.executable, "-m", "mapush", "report", out / level], env)
            if code != 0:
                return code
    page = (out / "mid" / "report" / "index.html").resolve()
    print("%s\nmake try: the reports: %s and %s" % (BANNER, page,
          (out / "upper" / "report" / "index.html").resolve()), file=sys.stderr)
    if not args.no_open and (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
                             or sys.platform == "darwin"):
        webbrowser.open(page.as_uri())
    return 0


if __name__ == "__main__":
    sys.exit(main())
