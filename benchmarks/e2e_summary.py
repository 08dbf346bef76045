"""The end-to-end call's summary (``benchmarks/e2e_call.sh``, issue #49): each run's env steps/s
per update (its ``progress.txt``), the median of each run with its first update left out (the
start: captures, allocations), and ours / upstream for each adjacent pair of the call's
alternated order, with the pairs' median and interquartile range.

    python benchmarks/e2e_summary.py RUN [RUN ...] --out FILE [--what TEXT]

Each RUN is a run folder named ``r-<up|ours>-<n>`` (n: its place in the call's order). The
pairs are the runs in order, two by two (up, ours, ours, up, ...: each pair one of each).
"""
import argparse
import json
import re
import statistics
import sys
from pathlib import Path


def steps_per_s(run: Path) -> list:
    """``[steps, steps_per_s]`` for each update of ``run`` (``progress.txt``)."""
    rows = []
    for line in (run / "progress.txt").read_text().splitlines()[1:]:
        fields = line.split(",")
        if len(fields) >= 3 and fields[2]:
            rows.append([int(fields[0]), float(fields[2])])
    return rows


def quartiles(values: list) -> list:
    """The first quartile, the median and the third quartile (inclusive method)."""
    if len(values) == 1:
        return [values[0]] * 3
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return [q1, median, q3]


def summary(runs: list) -> dict:
    named = []
    for run in runs:
        match = re.fullmatch(r"r-(up|ours)-(\d+)", run.name)
        if not match:
            raise SystemExit("error: %s is not a run folder named r-<up|ours>-<n>" % run)
        named.append((int(match.group(2)), match.group(1), run))
    named.sort()
    progress, medians = {}, {}
    for n, kind, run in named:
        key = "%s-%d" % (kind, n)
        progress[key] = steps_per_s(run)
        later = [fps for _, fps in progress[key][1:]]
        medians[key] = round(statistics.median(later), 1) if later else None
    pairs = []
    for (n1, k1, _), (n2, k2, _) in zip(named[0::2], named[1::2]):
        if k1 == k2:
            raise SystemExit("error: the pair %d, %d is two %s runs: the call's order must "
                             "alternate" % (n1, n2, k1))
        first, second = "%s-%d" % (k1, n1), "%s-%d" % (k2, n2)
        up, ours = (first, second) if k1 == "up" else (second, first)
        if medians[up] and medians[ours]:
            pairs.append({"up": up, "ours": ours, "ratio": round(medians[ours] / medians[up], 3)})
    ratios = [p["ratio"] for p in pairs]
    return {"progress": progress, "median_steps_per_s": medians, "pairs": pairs,
            "ratio_quartiles": [round(x, 3) for x in quartiles(ratios)] if ratios else None}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--out", required=True)
    parser.add_argument("--what", default="")
    args = parser.parse_args(argv)
    record = dict({"what": args.what}, **summary([Path(r) for r in args.runs]))
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps({k: record[k] for k in ("median_steps_per_s", "pairs", "ratio_quartiles")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
