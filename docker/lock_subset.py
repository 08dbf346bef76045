#!/usr/bin/env python3
"""Print the blocks of a hashed lock for the named packages, hashes included.

The image bootstraps pip, setuptools and wheel from env/requirements.lock before installing
the rest (the venv's own pip is too old for some wheel tags); taking them out of the one
lock keeps a single source of versions and hashes. Python 3.8, standard library only.

usage: lock_subset.py LOCK NAME [NAME ...]
"""
import re
import sys
from typing import Dict, List, Optional


def normalize(name: str) -> str:
    """PEP 503 name normalization."""
    return re.sub(r"[-_.]+", "-", name).lower()


def blocks(text: str) -> Dict[str, List[str]]:
    """``{normalized name: [requirement line, hash lines...]}`` of a pip-compile style lock."""
    found = {}  # type: Dict[str, List[str]]
    current = None  # type: Optional[List[str]]
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            if not line.startswith((" ", "\t")):
                current = None
            continue
        if line.startswith((" ", "\t")):
            if current is not None:
                current.append(line)
            continue
        name = re.split(r"[=<>!~\[; @\\]", line, 1)[0].strip()
        current = [line]
        found[normalize(name)] = current
    return found


def main(argv: List[str]) -> int:
    if len(argv) < 3:
        print("usage: lock_subset.py LOCK NAME [NAME ...]", file=sys.stderr)
        return 2
    with open(argv[1]) as handle:
        table = blocks(handle.read())
    missing = [n for n in argv[2:] if normalize(n) not in table]
    if missing:
        print("error: %s: no entry for %s" % (argv[1], ", ".join(missing)), file=sys.stderr)
        return 1
    for name in argv[2:]:
        lines = table[normalize(name)]
        last = lines[-1].rstrip()
        lines = lines[:-1] + [last[:-1].rstrip() if last.endswith("\\") else last]
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
