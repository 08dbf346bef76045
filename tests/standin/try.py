#!/usr/bin/env python3
"""``make try``: MAPush's whole method on a CPU in minutes, over the tests' Isaac Gym stand-in.

It runs ``mapush pipeline`` (a short mid level, every checkpoint evaluated, the high level
trained over the best one and evaluated with RRT) and ``mapush report`` of both runs, with
MAPush's real MQE over ``tests/standin`` (a planar MuJoCo world, no PhysX): a tour of the
commands and of what a run writes, without a GPU, Docker or the Isaac Gym tarball. Nothing
it shows is a result of MAPush: each run records Isaac Gym ``0+stand-in`` in its
config.json, and each report carries a banner that says so.

usage: python tests/standin/try.py [--dir runs/try] [--no-open]

Needs the test venv (``make venv``) and MAPush at the pin (``MAPUSH_SRC``; ``make try``
fetches it into build/ as ``make test`` does). The prepared tree is kept in build/try/; the
runs go to ``--dir``, and a second ``make try`` with the same folder resumes or skips what
is done (the pipeline's record). Exit status: the pipeline's, then the reports'; 2 for bad
input."""
import argparse
import os
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

# Small enough for minutes on two cores: 4 PPO updates of the mid level, 2 of the high level,
# and episodes of 10 s and 30 s instead of MQE's 20 s and 160 s (recorded in each run's spec).
MID = {"episode_length": 40, "ppo_epoch": 2}
UPPER = {"episode_length": 10, "ppo_epoch": 1}
EPISODE_S = {"--set": 10, "--upper-set": 30}


def pipeline_options(envs):
    """``mapush pipeline``'s options (docs/cli.md) for ``envs`` envs a level."""
    return ["--object", "cuboid", "--num-envs", envs, "--upper-num-envs", envs, "--mid-steps",
            envs * MID["episode_length"] * 4, "--upper-steps", envs * UPPER["episode_length"] * 2,
            "--eval-envs", envs, "--sim-device", "cpu", "--rl-device", "cpu"] + [
                a for option, seconds in EPISODE_S.items()
                for a in (option, "task.env.episode_length_s=%d" % seconds)]
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


def environment(tree, site, records):
    """The contract of tests/standin/prepare_tree.py, as tests/conftest.py's real_env."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(str(p) for p in (site, HERE, tree, REPO)),
                MAPUSH_ROOT=str(tree), MAPUSH_PATCH_RECORDS=str(records), PYTHONUNBUFFERED="1",
                CUDA_VISIBLE_DEVICES="")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default="runs/try", help="where the runs go (default: %(default)s)")
    parser.add_argument("--envs", type=int, default=8, help="envs a level (default: %(default)s)")
    parser.add_argument("--work", default=str(REPO / "build" / "try"),
                        help="where the prepared MAPush tree is kept (default: %(default)s)")
    parser.add_argument("--no-open", action="store_true", help="do not open the report")
    args = parser.parse_args(argv)
    src = os.environ.get("MAPUSH_SRC")
    if not src or not Path(src, "mqe").is_dir():
        return fail("no MAPush tree at the pin (%s): set MAPUSH_SRC to a MAPush checkout at the "
                    "commit in env/pins.env, or let make try fetch it (it needs the network)"
                    % (os.environ.get("MAPUSH_SRC_MISSING") or "MAPUSH_SRC=%s" % (src or "")))
    out = Path(args.dir)
    if out.exists() and not (out / "pipeline.json").is_file():
        return fail("--dir %s exists and holds no make try of before (no pipeline.json); pass "
                    "another --dir: make try writes only into its own folder" % out)
    print(BANNER, file=sys.stderr, flush=True)
    if args.envs < 1:
        return fail("--envs %d: give 1 or more" % args.envs)
    tree = Path(args.work) / "MAPush"
    prepared = subprocess.run([sys.executable, str(HERE / "prepare_tree.py"), src, str(tree)])
    if prepared.returncode != 0:
        return fail("could not prepare the MAPush tree in %s (above)" % tree)
    with tempfile.TemporaryDirectory(prefix="mapush-try-") as tmp:
        site = build_patched_site(Path(tmp))
        records = Path(tmp) / "records-all"
        records.mkdir()
        for record in list(site["records"].glob("*.json")) + \
                list((tree / ".mapush-patches").glob("*.json")):
            shutil.copyfile(str(record), str(records / record.name))
        env = environment(tree, site["site"], records)
        configs = []
        for name, values in (("mid", MID), ("upper", UPPER)):
            path = Path(args.work) / ("%s.yaml" % name)  # kept: the pipeline records its path
            path.write_text("".join("%s: %s\n" % item for item in values.items()))
            configs.append(path)
        code = run([sys.executable, "-m", "mapush", "pipeline"] + pipeline_options(args.envs) +
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
