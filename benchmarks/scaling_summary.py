"""The weak-scaling call's summary (``benchmarks/scaling_call.sh``, issue #52): how the envs'
own speed scales when two or four GPUs of one host each run a training process at once (as
``mapush sweep`` runs its cells), against one process alone on one GPU. No collective: this
is the ceiling that one run across the GPUs (``mapush train --gpus``) would reach before its
all-reduces, which ``openrl_ranks.py`` measures apart.

    python benchmarks/scaling_summary.py RUN [RUN ...] --out FILE [--what TEXT]
        [--memory NVIDIA_SMI_CSV]

Each RUN is a run folder named ``one-<n>`` (slot n's only process, on GPU 0) or
``two-<n>-<gpu>`` / ``four-<n>-<gpu>`` (one of slot n's two or four processes, one a GPU). A
slot's env steps/s is the sum of its runs' medians (each without its first update:
``e2e_summary.steady_median``). Each slot of several processes is paired with the ``one``
slot right before it, else the one right after it, and every slot must be in exactly one
pair (else the order is refused): the call alternates one with the others, e.g. one, two,
two, one or one, four, two, one. Each pair's ratio is the slot's rate over the one's, with
the ratios' quartiles for each kind. ``--memory``: ``nvidia-smi
--query-gpu=index,memory.used --format=csv,noheader,nounits`` lines sampled through the call;
the most each GPU held.
"""
import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.e2e_summary import quartiles, refuse, steady_median, steps_per_s  # noqa: E402

PROCESSES = {"one": 1, "two": 2, "four": 4}  # a slot's kind: how many processes at once
RUN_NAME = re.compile(r"(one)-(\d+)|(%s)-(\d+)-(\d+)" % "|".join(
    kind for kind, count in PROCESSES.items() if count > 1))


def slots(runs: list) -> list:
    """``[(n, kind, {run name: steps_per_s rows})]`` in slot order."""
    found = {}  # type: dict
    for run in runs:
        match = RUN_NAME.fullmatch(run.name)
        if not match:
            refuse("%s is not a run folder named one-<n>, two-<n>-<gpu> or four-<n>-<gpu>" % run)
        kind, n = (match.group(1), match.group(2)) if match.group(1) else \
            (match.group(3), match.group(4))
        entry = found.setdefault(int(n), (kind, {}))
        if entry[0] != kind:
            refuse("slot %s holds runs of two kinds (%s and %s)" % (n, entry[0], kind))
        entry[1][run.name] = steps_per_s(run)
    for n, (kind, rows) in found.items():
        if len(rows) != PROCESSES[kind]:
            refuse("slot %d (%s) holds %d runs" % (n, kind, len(rows)))
    return [(n, kind, rows) for n, (kind, rows) in sorted(found.items())]


def paired(ordered: list, rate: dict) -> dict:
    """Each slot of several processes with the ``one`` slot right before it, else right
    after it; every slot in exactly one pair, else refused. ``pairs`` (the ratio where both
    rates are known) and ``ratio_quartiles`` for each kind."""
    kinds = [kind for _, kind in ordered]
    names = ["%s-%d" % (kind, n) for n, kind in ordered]
    used, pairs = set(), []
    by_kind = {}  # type: dict  # the ratios of each kind
    for i, kind in enumerate(kinds):
        if kind == "one":
            continue
        beside = [j for j in (i - 1, i + 1) if 0 <= j < len(kinds) and kinds[j] == "one"
                  and j not in used]
        if not beside:
            refuse("slot %s has no free one slot beside it: the call's order must alternate "
                   "one with the others (one, two, two, one, ...)" % names[i])
        used.add(beside[0])
        one, mine = names[beside[0]], names[i]
        if rate[one] and rate[mine]:
            pairs.append({"one": one, kind: mine, "ratio": round(rate[mine] / rate[one], 3)})
            by_kind.setdefault(kind, []).append(pairs[-1]["ratio"])
    alone = [names[j] for j, kind in enumerate(kinds) if kind == "one" and j not in used]
    if alone:
        refuse("slot %s is in no pair: the call's order must alternate one with the others "
               "(one, two, two, one, ...)" % alone[0])
    return {"pairs": pairs, "ratio_quartiles": {kind: [round(x, 3) for x in quartiles(r)]
                                                for kind, r in sorted(by_kind.items())}}


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
    progress = {name: rows for _, _, by_run in ordered for name, rows in by_run.items()}
    medians = {name: steady_median(rows) for name, rows in progress.items()}
    rate = {}
    for n, kind, by_run in ordered:
        mine = [medians[name] for name in by_run]
        rate["%s-%d" % (kind, n)] = round(sum(mine), 1) if None not in mine else None
    pairs = paired([(n, kind) for n, kind, _ in ordered], rate)
    return dict({"progress": progress, "median_steps_per_s": medians,
                 "slot_steps_per_s": rate}, **pairs)


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
