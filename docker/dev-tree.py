#!/usr/bin/env python3
"""``make dev MAPUSH_DIR=../MAPush``: your own MAPush checkout, patched, as the container's.

usage: dev-tree.py SRC DEST PATCHES RECORDS IMAGE_RECORDS

SRC is your checkout, mounted read-only: it is copied to DEST (inside the container, so
nothing of yours is written), and our patches (PATCHES/mapush/*.patch, in name order) are
applied to the copy with ``patch -p1``. Your edits may change the files a patch touches, so
unlike ``patches/apply`` at the pin nothing is checked against env/upstream.sha256: each
patch is tried first (``--dry-run``), and one that does not apply is one ``error:`` line
naming it, exit 2. RECORDS gets the image's OpenRL and HARL records (IMAGE_RECORDS) and a
MAPush record that says the tree is yours (``pinned: false``, the source folder, each
touched file's sha256 before and after): every run's config.json carries it.

Python 3.8, standard library only, plus the system ``patch`` program."""
import datetime
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def touched(patch: Path) -> list:
    return sorted({line[len("+++ b/"):].split("\t")[0].strip()
                   for line in patch.read_text().splitlines() if line.startswith("+++ b/")})


def summary(patch: Path) -> str:
    return next((line.lstrip("# ").strip() for line in patch.read_text().splitlines()
                 if line.startswith("#") and line.strip("# ")), "")


def fail(message: str) -> None:
    print("error: " + message, file=sys.stderr)
    sys.exit(2)


def main(argv: list) -> None:
    if len(argv) != 5:
        fail("usage: dev-tree.py SRC DEST PATCHES RECORDS IMAGE_RECORDS")
    src, dest, patches, records, image_records = (Path(a) for a in argv)
    if not (src / "mqe" / "__init__.py").is_file():
        fail("MAPUSH_DIR (%s here) is no MAPush checkout: it has no mqe/__init__.py; pass "
             "the folder `git clone` made" % src)
    if dest.exists():
        shutil.rmtree(str(dest))
    shutil.copytree(str(src), str(dest), symlinks=True,
                    ignore=shutil.ignore_patterns(".git", "__pycache__", "*.pyc"))
    applied, files = [], {}
    for patch in sorted((patches / "mapush").glob("*.patch")):
        for rel in touched(patch):
            if rel not in files and (dest / rel).is_file():
                files[rel] = sha256(dest / rel)
        command = ["patch", "-p1", "-s", "-N", "-d", str(dest), "-i", str(patch)]
        trial = subprocess.run(command + ["--dry-run"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, universal_newlines=True)
        if trial.returncode != 0:
            first = (trial.stdout.strip().splitlines() or ["patch failed"])[0]
            fail("our patch %s does not apply to your MAPush at MAPUSH_DIR (%s): rebase your "
                 "changes on MAPush at its pin (MAPUSH_COMMIT in env/pins.env), or keep them "
                 "out of the files it changes (%s)" % (patch.name, first, ", ".join(
                     touched(patch))))
        subprocess.run(command, check=True)
        applied.append({"name": patch.name, "sha256": sha256(patch), "summary": summary(patch)})
    records.mkdir(parents=True, exist_ok=True)
    for name in ("openrl.json", "harl.json"):
        if (image_records / name).is_file():
            shutil.copy(str(image_records / name), str(records / name))
    record = {"component": "mapush", "status": "applied", "dir": str(dest), "pinned": False,
              "source": "MAPUSH_DIR, mounted at %s: a MAPush checkout of the user's (make dev),"
                        " not checked against the pin" % src,
              "patches": applied, "applied_at": datetime.datetime.now().astimezone().isoformat(
                  timespec="seconds"),
              "files": [{"path": rel, "before": before, "after": sha256(dest / rel)}
                        for rel, before in sorted(files.items())]}
    (records / "mapush.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    print("mapush: make dev: your MAPush (MAPUSH_DIR) with our %d patches at %s"
          % (len(applied), dest), file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
