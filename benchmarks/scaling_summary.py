"""The weak-scaling call's summary (``benchmarks/scaling_call.sh``, issue #52): how the envs'
own speed scales when two GPUs of one host each run a training process at once (as ``mapush
sweep`` runs its cells), against one process alone on one GPU. No collective: this is the
ceiling that one run across the GPUs (``mapush train --gpus``) would reach before its
all-reduces, which ``openrl_ranks.py`` measures apart.

    python benchmarks/scaling_summary.py RUN [RUN ...] --out FILE [--what TEXT]
        [--memory NVIDIA_SMI_CSV]

Each RUN is a run folder named ``one-<n>`` (the slot's only process, on GPU 0) or
``two-<n>-<gpu>`` (one of slot n's two processes). A slot's env steps/s is the sum of its
runs' medians (each without its first update: ``e2e_summary.steady_median``); the pairs are
the slots in the call's order, two by two (one, two, two, one, ...), each pair's ratio two
over one, with the ratios' median and IQR. ``--memory``: ``nvidia-smi
--query-gpu=index,memory.used --format=csv,noheader,nounits`` lines sampled through the call;
the most each GPU held.
"""
import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.e2e_summary import quartiles, steady_median, steps_per_s  # noqa: E402


def slots(runs: list) -> list:
    """``[(n, kind, {run name: median})]`` in slot order."""
    found = {}  # type: dict
    for run in runs:
        match = re.fullmatch(r"(one)-(\d+)|(two)-(\d+)-(\d+)", run.name)
        if not match:
            raise SystemExit("error: %s is not a run folder named one-<n> or two-<n>-<gpu>"
                             % run)
        kind, n = (match.group(1), match.group(2)) if match.group(1) else \
            (match.group(3), match.group(4))
        entry = found.setdefault(int(n), (kind, {}))
        if entry[0] != kind:
            raise SystemExit("error: slot %s holds both one- and two- runs" % n)
        entry[1][run.name] = steady_median(steps_per_s(run))
    for n, (kind, medians) in found.items():
        if len(medians) != (1 if kind == "one" else 2):
            raise SystemExit("error: slot %d (%s) holds %d runs" % (n, kind, len(medians)))
    return [(n, kind, medians) for n, (kind, medians) in sorted(found.items())]


def memory(lines: list) -> dict:
    """The most MiB each GPU held over the ``nvidia-smi`` samples."""
    most = {}  # type: dict
    for line in lines:
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit():
            most[fields[0]] = max(most.get(fields[0], 0), int(fields[1]))
    return most


def summary(runs: list) -> dict:
    ordered = slots(runs)
    rate = {}
    for n, kind, medians in ordered:
        rate["%s-%d" % (kind, n)] = (round(sum(medians.values()), 1)
                                     if None not in medians.values() else None)
    pairs = []
    for (n1, k1, _), (n2, k2, _) in zip(ordered[0::2], ordered[1::2]):
        if k1 == k2:
            raise SystemExit("error: the pair %d, %d is two %s slots: the call's order must "
                             "alternate" % (n1, n2, k1))
        one, two = ("%s-%d" % (k1, n1), "%s-%d" % (k2, n2)) if k1 == "one" else \
            ("%s-%d" % (k2, n2), "%s-%d" % (k1, n1))
        if rate[one] and rate[two]:
            pairs.append({"one": one, "two": two, "ratio": round(rate[two] / rate[one], 3)})
    ratios = [p["ratio"] for p in pairs]
    return {"progress": {run.name: steps_per_s(run) for run in runs},
            "median_steps_per_s": {name: m for _, _, medians in ordered
                                   for name, m in medians.items()},
            "slot_steps_per_s": rate, "pairs": pairs,
            "ratio_quartiles": [round(x, 3) for x in quartiles(ratios)] if ratios else None}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--out", required=True)
    parser.add_argument("--what", default="")
    parser.add_argument("--memory", help="nvidia-smi's samples (index, MiB used), one a line")
    args = parser.parse_args(argv)
    record = dict({"what": args.what}, **summary([Path(r) for r in args.runs]))
    if args.memory:
        record["gpu_memory_mib_most"] = memory(Path(args.memory).read_text().splitlines())
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps({k: v for k, v in record.items() if k != "progress"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
