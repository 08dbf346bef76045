#!/usr/bin/env python3
"""Fail the image build when the Python stack is not the pinned CUDA 11.6 one.

The user's environments broke on CUDA 12 wheels next to a CUDA 11.6 torch and on a second
torch pulled in by a dependency (README: the failures this project ends). This check makes those states unbuildable:
no ``nvidia-*`` wheel and no ``triton`` but those the stack's lock pins (--lock; the cu121
lock pins torch 2.3.1's CUDA 12.1 wheels, the cu116 lock none), exactly one torch and one torchvision distribution at
the pinned versions, and (unless --no-import) ``torch.version.cuda`` equal to the pin.
Python 3.8, standard library only (plus torch for the import check).

usage: check_stack.py --torch V --torchvision V --cuda X.Y [--lock LOCK] [--path DIR ...]
                      [--no-import]
Exit status: 0 good, 1 a violation (one line each on stderr), 2 usage.
"""
import argparse
import re
import sys
from typing import Dict, List, Optional

try:
    from importlib import metadata
except ImportError:  # pragma: no cover - Python < 3.8
    print("error: check_stack.py needs Python 3.8+", file=sys.stderr)
    sys.exit(2)

FORBIDDEN_PREFIXES = ("nvidia-",)
FORBIDDEN_NAMES = ("triton",)


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed(paths: Optional[List[str]]) -> Dict[str, List[str]]:
    """``{normalized name: [version, ...]}``, one version per distribution found."""
    found = {}  # type: Dict[str, List[str]]
    dists = metadata.distributions(path=paths) if paths else metadata.distributions()
    for dist in dists:
        name = dist.metadata["Name"]
        if name:
            found.setdefault(normalize(name), []).append(dist.version)
    return found


def locked(lock_text: str) -> Dict[str, str]:
    """``{normalized name: version}`` of a pip-compile style lock's ``name==version`` lines."""
    pins = {}
    for line in lock_text.splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)==([^ ;\\]+)", line)
        if match:
            pins[normalize(match.group(1))] = match.group(2)
    return pins


def violations(dists: Dict[str, List[str]], torch: str, torchvision: str,
               lock: Optional[Dict[str, str]] = None) -> List[str]:
    problems = []
    for name in sorted(dists):
        if lock and lock.get(name) is not None and dists[name] == [lock[name]]:
            continue  # a CUDA wheel the stack's lock pins, at its version
        if name.startswith(FORBIDDEN_PREFIXES) or name in FORBIDDEN_NAMES:
            problems.append("%s %s is installed: CUDA libraries must come only from the "
                            "torch %s wheel" % (name, ", ".join(dists[name]), torch))
    for name, pin in (("torch", torch), ("torchvision", torchvision)):
        versions = dists.get(name, [])
        if len(versions) != 1:
            problems.append("%d %s distributions installed (%s); expected exactly one, %s"
                            % (len(versions), name, ", ".join(versions) or "none", pin))
        elif versions[0] != pin:
            problems.append("%s %s is installed; the pin is %s" % (name, versions[0], pin))
    return problems


def cuda_violation(cuda: str) -> Optional[str]:
    import torch

    if torch.version.cuda != cuda:
        return "torch.version.cuda is %s; the pin is %s" % (torch.version.cuda, cuda)
    return None


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch", required=True)
    parser.add_argument("--torchvision", required=True)
    parser.add_argument("--cuda", required=True)
    parser.add_argument("--lock", help="the stack's lock: the nvidia-* and triton wheels it "
                                       "pins are allowed at its versions")
    parser.add_argument("--path", action="append", help="look only here (default sys.path)")
    parser.add_argument("--no-import", action="store_true", help="skip importing torch")
    args = parser.parse_args(argv)
    dists = installed(args.path)
    lock = None
    if args.lock:
        with open(args.lock) as fh:
            lock = locked(fh.read())
    problems = violations(dists, args.torch, args.torchvision, lock)
    if not problems and not args.no_import:
        problem = cuda_violation(args.cuda)
        if problem:
            problems.append(problem)
    for problem in problems:
        print("error: %s" % problem, file=sys.stderr)
    if problems:
        return 1
    cuda_wheels = sorted(n for n in dists if n.startswith(FORBIDDEN_PREFIXES) or
                         n in FORBIDDEN_NAMES)
    print("stack ok: torch %s, torchvision %s, CUDA %s, %d distributions, %s"
          % (args.torch, args.torchvision, args.cuda, len(dists),
             "the lock's CUDA wheels: " + ", ".join(cuda_wheels) if cuda_wheels
             else "no nvidia-* wheel"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
