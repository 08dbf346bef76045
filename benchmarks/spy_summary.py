"""Where a profiled process spends its time: py-spy's raw output (``py-spy record
--subprocesses --format raw``) summed per function, for the process with the most samples.

Each line of the raw format is one stack (``frame;frame;...``, outermost first, with
``--subprocesses`` a ``process PID:"cmdline"`` frame first) and its sample count. A
function's inclusive share counts each stack once however often the function recurs in it;
its self share counts the stacks it ends. Used for ``results/e2e-profile-04-h100-20261127.txt``
(``mapush train`` over real MQE and the stand-in on an H100, the run's start included).

    python3 benchmarks/spy_summary.py RAW [--top 70]
"""
import argparse
import collections
import re
from typing import Dict, List, Tuple

FRAME = re.compile(r"(.*) \((.*?):\d+\)$")


def key(frame: str) -> str:
    """``function (file)``: the line number and the folders dropped."""
    match = FRAME.match(frame)
    return "%s (%s)" % (match.group(1), match.group(2).split("/")[-1]) if match else frame


def read(path: str) -> Dict[str, List[Tuple[List[str], int]]]:
    """Stacks per first frame (the process, with ``--subprocesses``)."""
    stacks = collections.defaultdict(list)  # type: Dict[str, List[Tuple[List[str], int]]]
    with open(path) as fh:
        for line in fh:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if count.isdigit() and stack:
                frames = stack.split(";")
                stacks[frames[0]].append((frames[1:], int(count)))
    return stacks


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("raw")
    parser.add_argument("--top", type=int, default=70)
    args = parser.parse_args()
    stacks = read(args.raw)
    totals = collections.Counter({name: sum(n for _, n in rows) for name, rows in stacks.items()})
    print("processes:", [(name[:120], n) for name, n in totals.most_common(3)])
    name, total = totals.most_common(1)[0]
    inclusive, own = collections.Counter(), collections.Counter()
    for frames, n in stacks[name]:
        for function in {key(f) for f in frames}:
            inclusive[function] += n
        if frames:
            own[key(frames[-1])] += n
    print("total samples", total)
    for title, counter, top in (("inclusive", inclusive, args.top), ("self", own, args.top // 2)):
        print("==", title)
        for function, n in counter.most_common(top):
            print("%5.1f%% %s" % (100.0 * n / total, function[:150]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
