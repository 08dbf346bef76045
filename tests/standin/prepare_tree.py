#!/usr/bin/env python3
"""Prepare a MAPush tree for the tests: ``python tests/standin/prepare_tree.py SRC DEST``.

- copies the MAPush checkout SRC (at the pin) to DEST (which must not exist, or be a tree
  this command prepared from the same SRC, which is then left as it is);
- applies our patches with ``patches/apply mapush DEST``, as the image does (``--pristine``:
  leaves MQE unpatched, for comparisons with upstream's own code);
- writes what the snapshot lacks. ``body_latest.jit``, walk-these-ways' locomotion body, is
  not in the stored snapshot: a TorchScript stand-in of the same interface takes its place,
  an MLP 2102 -> 512 -> 256 -> 128 -> 12 with ELU as walk-these-ways' body (input: the
  2100-dim observation history and the adaptation module's 2-dim latent,
  ``mqe/envs/go1/go1.py:388-408``), seeded, so every prepared tree holds the same module.
  ``STANDIN.json`` in DEST lists each file stood in; the real
  ``adaptation_module_latest.jit`` is used as it is.

Then, with ``tests/standin`` and DEST first on ``PYTHONPATH``, ``MAPUSH_ROOT=DEST`` and
``--sim-device cpu --rl-device cpu``, every ``mapush`` command runs over real MQE.
Exit status: 0 done, 1 failed, 2 bad arguments.
"""
import argparse
import hashlib
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
BODY_SEED = 20240101


def write_body(path):
    """The stand-in locomotion body, scripted, written atomically."""
    import torch

    gen = torch.Generator().manual_seed(BODY_SEED)
    sizes = [2102, 512, 256, 128, 12]
    layers = []
    for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        linear = torch.nn.Linear(n_in, n_out)
        with torch.no_grad():
            bound = 1.0 / n_in ** 0.5
            linear.weight.copy_(torch.rand(n_out, n_in, generator=gen) * 2 * bound - bound)
            linear.bias.copy_(torch.rand(n_out, generator=gen) * 2 * bound - bound)
        layers.append(linear)
        if i < len(sizes) - 2:
            layers.append(torch.nn.ELU())
    body = torch.jit.script(torch.nn.Sequential(*layers).eval())
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    os.close(fd)
    torch.jit.save(body, tmp)
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
            stood_in[BODY] = ("a seeded TorchScript MLP 2102-512-256-128-12 with ELU, the "
                              "interface of walk-these-ways' body (tests/standin/"
                              "prepare_tree.py); the snapshot lacks the real one")
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
