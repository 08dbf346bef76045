"""The end-to-end call's summary (``benchmarks/e2e_call.sh``, issue #49): each run's env steps/s
per update (its ``progress.txt``), the median of each run with its first update left out (the
start: captures, allocations), and ours / upstream for each adjacent pair of the call's
alternated order, with the pairs' median and interquartile range.

    python benchmarks/e2e_summary.py RUN [RUN ...] --out FILE [--what TEXT]
        [--timed RUN=TIMES ...] [--num-envs 500]

Each RUN is a run folder named ``r-<up|ours>-<n>`` (n: its place in the call's order). The
pairs are the runs in order, two by two (up, ours, ours, up, ...: each pair one of each).
A ``--timed`` run (``learning.py --standin-times``) is summarized apart: the share of its wall
time inside the Isaac Gym stand-in, and that share of its vector step in ms (the stand-in's
cost, which a run over PhysX does not pay; its timing syncs the device at each call, so the
run itself is a little slower than an untimed one).
"""
import argparse
import json
import re
import statistics
import sys
from pathlib import Path


def refuse(message: str) -> None:
    """Bad input (a run folder, a call's order): one ``error:`` line, exit 2."""
    print("error: " + message, file=sys.stderr)
    raise SystemExit(2)


def steps_per_s(run: Path) -> list:
    """``[steps, steps_per_s]`` for each update of ``run`` (``progress.txt``)."""
    rows = []
    for line in (run / "progress.txt").read_text().splitlines()[1:]:
        fields = line.split(",")
        if len(fields) >= 3 and fields[2]:
            rows.append([int(fields[0]), float(fields[2])])
    return rows


def steady_median(rows: list):
    """The median env steps/s of a run's updates after its first (``steps_per_s``'s rows);
    None for a run of one update."""
    later = [fps for _, fps in rows[1:]]
    return round(statistics.median(later), 1) if later else None


def quartiles(values: list) -> list:
    """The first quartile, the median and the third quartile (inclusive method)."""
    if len(values) == 1:
        return [values[0]] * 3
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return [q1, median, q3]


def standin_share(times: Path) -> dict:
    """From a timed run's ``ISAACGYM_STANDIN_TIMES`` lines (tests/standin/isaacgym/timing.py):
    the share of wall time spent in the stand-in, from the line where a quarter of the run's
    ``simulate`` calls were made (the start and the first steps left out) to the last; the
    stand-in's ms per ``simulate`` call; and the share of each method."""
    lines = [json.loads(line) for line in times.read_text().splitlines() if line.strip()]
    last = lines[-1]
    calls = last["calls"].get("simulate", 0)
    first = next(line for line in lines if line["calls"].get("simulate", 0) >= calls / 4)
    wall, inside = last["wall"] - first["wall"], last["total"] - first["total"]
    steps = calls - first["calls"].get("simulate", 0)
    if wall <= 0 or steps <= 0:
        refuse("%s holds too short a run to time the stand-in" % times)
    by_method = {name: round((seconds - first["seconds"].get(name, 0.0)) / wall, 4)
                 for name, seconds in last["seconds"].items()}
    return {"share": round(inside / wall, 4), "ms_per_simulate": round(inside / steps * 1e3, 3),
            "window_s": round(wall, 1), "share_by_method": {
                k: v for k, v in sorted(by_method.items(), key=lambda kv: -kv[1]) if v >= 0.001}}


def summary(runs: list) -> dict:
    named = []
    for run in runs:
        match = re.fullmatch(r"r-(up|ours)-(\d+)", run.name)
        if not match:
            refuse("%s is not a run folder named r-<up|ours>-<n>" % run)
        named.append((int(match.group(2)), match.group(1), run))
    named.sort()
    progress, medians = {}, {}
    for n, kind, run in named:
        key = "%s-%d" % (kind, n)
        progress[key] = steps_per_s(run)
        medians[key] = steady_median(progress[key])
    pairs = alternated_pairs([(n, kind) for n, kind, _ in named], "up", "ours", medians, "runs")
    return dict({"progress": progress, "median_steps_per_s": medians}, **pairs)


def alternated_pairs(ordered: list, base: str, other: str, rate: dict, what: str) -> dict:
    """The call's ``ordered`` ``(n, kind)`` two by two, each pair one ``base`` and one
    ``other`` whichever came first (else refused: the order must alternate), keyed
    ``"<kind>-<n>"`` in ``rate``: ``pairs`` (each with other's rate over base's, where both
    are known) and the ratios' ``ratio_quartiles``."""
    pairs = []
    for (n1, k1), (n2, k2) in zip(ordered[0::2], ordered[1::2]):
        if k1 == k2:
            refuse("the pair %d, %d is two %s %s: the call's order must alternate"
                   % (n1, n2, k1, what))
        first, second = "%s-%d" % (k1, n1), "%s-%d" % (k2, n2)
        low, high = (first, second) if k1 == base else (second, first)
        if rate[low] and rate[high]:
            pairs.append({base: low, other: high, "ratio": round(rate[high] / rate[low], 3)})
    ratios = [p["ratio"] for p in pairs]
    return {"pairs": pairs,
            "ratio_quartiles": [round(x, 3) for x in quartiles(ratios)] if ratios else None}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="*")
    parser.add_argument("--out", required=True)
    parser.add_argument("--what", default="")
    parser.add_argument("--timed", action="append", default=[], metavar="RUN=TIMES",
                        help="a run timed with ISAACGYM_STANDIN_TIMES=TIMES (not in the pairs)")
    parser.add_argument("--num-envs", type=int, default=500)
    args = parser.parse_args(argv)
    record = dict({"what": args.what}, **summary([Path(r) for r in args.runs]))
    record["timed"] = {}
    for item in args.timed:
        run, times = (Path(p) for p in item.split("=", 1))
        median = steady_median(steps_per_s(run))
        if median is None:
            refuse("%s logged one update: a timed run needs two or more" % run)
        timed = dict(standin_share(times), steps_per_s=median)
        step_ms = args.num_envs / timed["steps_per_s"] * 1e3
        timed.update(step_ms=round(step_ms, 2), standin_ms=round(step_ms * timed["share"], 2))
        record["timed"][run.name] = timed
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps({k: record[k] for k in ("median_steps_per_s", "pairs", "ratio_quartiles",
                                              "timed")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
