#!/usr/bin/env python3
"""Prepare a MAPush tree for the tests: ``python tests/standin/prepare_tree.py SRC DEST``.

- copies the MAPush checkout SRC (at the pin) to DEST (which must not exist, or be a tree
  this command prepared from the same SRC, which is then left as it is);
- applies our patches with ``patches/apply mapush DEST``, as the image does (``--pristine``:
  leaves MQE unpatched, for comparisons with upstream's own code);
- writes what the snapshot lacks. ``body_latest.jit``, walk-these-ways' locomotion body, is
  not in the stored snapshot: a TorchScript stand-in of the same interface takes its place
  (input: the 2100-dim observation history and the adaptation module's 2-dim latent,
  ``mqe/envs/go1/go1.py:388-408``; output: 12 joint actions) that turns the commanded
  velocity into joint targets the stand-in physics reads (``write_body``, ``WALK_GAINS``).
  ``STANDIN.json`` in DEST lists each file stood in; the real
  ``adaptation_module_latest.jit`` is used as it is.

Then, with ``tests/standin`` and DEST first on ``PYTHONPATH``, ``MAPUSH_ROOT=DEST`` and
``--sim-device cpu --rl-device cpu``, every ``mapush`` command runs over real MQE.
Exit status: 0 done, 1 failed, 2 bad arguments.
"""
import argparse
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
WTW = os.path.join("mqe", "utils", "locomotion_checkpoints", "walk_these_ways")
BODY = os.path.join(WTW, "body_latest.jit")
MARK = "STANDIN.json"
# walk-these-ways' body reads the command from the newest 70-dim frame of its 2,100-dim
# history (go1.py:101 appends the frame; go1.py:66-67 write its columns 3-5: lin_vel_x and
# lin_vel_y times obs_scales.lin_vel 2.0, the yaw rate times obs_scales.ang_vel 0.25,
# go1_config.py:142-143), then the adaptation module's 2-dim latent (go1.py:402-403).
COMMAND = slice(2030 + 3, 2030 + 6)
# Joint actions per scaled command (+g on one joint of a pair, -g on the other): a joint's
# target moves by action_scale 0.25 times its action (go1.py:328-340; the hips, halved, are
# not used), and the stand-in physics reads the base's velocity as the pair's difference,
# 1 m/s or rad/s per rad (tests/standin/isaacgym/gymapi.py: WALK_JOINTS). The difference is
# 0.25 * 2g * (2.0 v) = v for g = 1, and 0.25 * 2g * (0.25 w) = w for g = 8.
WALK_GAINS = {0: ((2, 1.0), (5, -1.0)),   # lin_vel_x: FL_calf - FR_calf
              1: ((8, 1.0), (11, -1.0)),  # lin_vel_y: RL_calf - RR_calf
              2: ((1, 8.0), (4, -8.0))}   # yaw rate: FL_thigh - FR_thigh


def write_body(path):
    """The stand-in locomotion body, scripted, written atomically: walk-these-ways' interface
    ((N, 2102) -> (N, 12) joint actions), whose actions set the joints that the stand-in
    physics turns into the base's velocity, so the base follows the commanded velocity."""
    import torch

    class Body(torch.nn.Module):
        def __init__(self, gains):
            super().__init__()
            self.register_buffer("gains", gains)

        def forward(self, x):
            return torch.matmul(x[:, 2033:2036], self.gains)

    gains = torch.zeros(3, 12)
    for row, pairs in WALK_GAINS.items():
        for col, gain in pairs:
            gains[row, col] = gain
    assert (COMMAND.start, COMMAND.stop) == (2033, 2036)
    body = torch.jit.script(Body(gains).eval())
    # saved through a buffer: the archive is then named "archive", not after a random temp
    # file, so the same body has the same bytes (make image-check's layer cache keeps it)
    buffer = io.BytesIO()
    torch.jit.save(body, buffer)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    with os.fdopen(fd, "wb") as handle:
        handle.write(buffer.getvalue())
    os.replace(tmp, path)


def sha256(path):
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def prepare(src, dest, pristine=False):
    mark = os.path.join(dest, MARK)
    if os.path.exists(dest):
        if os.path.isfile(mark):
            with open(mark) as handle:
                if json.load(handle).get("source") == os.path.abspath(src):
                    return dest
        raise SystemExit("error: DEST %s exists and is not a tree prepared from %s: remove it "
                         "or name another" % (dest, src))
    parent = os.path.dirname(os.path.abspath(dest))
    os.makedirs(parent, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".prepare-", dir=parent)
    try:
        tree = os.path.join(work, "tree")
        shutil.copytree(src, tree, ignore=shutil.ignore_patterns(".git", "__pycache__"))
        stood_in = {}
        body = os.path.join(tree, BODY)
        if not os.path.isfile(body) or os.path.getsize(body) < 1024:
            write_body(body)
            stood_in[BODY] = ("a TorchScript body with walk-these-ways' interface whose "
                              "joint actions encode the commanded velocity, which the stand-in "
                              "physics gives the base (tests/standin/prepare_tree.py); the "
                              "snapshot lacks the real one")
        os.replace(tree, dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    try:
        # in place, so that the patch record names the tree the runs read
        if not pristine:
            subprocess.run([sys.executable, os.path.join(REPO, "patches", "apply"), "mapush",
                            dest], check=True, stdout=subprocess.DEVNULL)
        with open(mark + ".tmp", "w") as handle:
            json.dump({"source": os.path.abspath(src), "patched": not pristine,
                       "stood_in": stood_in,
                       "sha256": {rel: sha256(os.path.join(dest, rel)) for rel in stood_in}},
                      handle, indent=1)
        os.replace(mark + ".tmp", mark)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return dest


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("src", help="MAPush checkout at the pin (MAPUSH_SRC)")
    parser.add_argument("dest", help="the tree to write (a new folder)")
    parser.add_argument("--pristine", action="store_true",
                        help="leave MQE unpatched (upstream's own code)")
    args = parser.parse_args(argv)
    if not os.path.isfile(os.path.join(args.src, "mqe", "envs", "utils.py")):
        print("error: SRC %s is not a MAPush checkout (no mqe/envs/utils.py): point it at "
              "MAPush at the pin, e.g. $MAPUSH_SRC" % args.src, file=sys.stderr)
        return 2
    prepare(args.src, args.dest, args.pristine)
    print(os.path.abspath(args.dest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
