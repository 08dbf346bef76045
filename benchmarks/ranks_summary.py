"""One summary of a ``ranks_patches_call.sh`` folder (the device call's ``$OUT``): for each
equivalence record (``<algo>-eq-<N>.json``) against its one-process record (``-eq-1``),
whether the ranks ended bit-identical, their largest distance from the one process, and the
agent orders; for each timing record (``t-<algo>-<N>-<i>.json``) each rank's update seconds.
Weights are not copied (the records of 1,000 envs are megabytes each).

    python3 benchmarks/ranks_summary.py DIR > summary.json
"""
import json
import sys
from pathlib import Path


def farthest(one: dict, other: dict) -> float:
    return max(max(abs(a - b) for a, b in zip(one[key], other[key])) for key in one)


def summary(folder: Path) -> dict:
    out = {"equivalence": {}, "timing": {}}
    for path in sorted(folder.glob("*-eq-*.json")):
        algo, world = path.stem.split("-eq-")
        if world == "1":
            continue
        ranks = json.loads(path.read_text())["ranks"]
        [one] = json.loads((folder / ("%s-eq-1.json" % algo)).read_text())["ranks"]
        out["equivalence"][path.stem] = {
            "ranks": len(ranks), "envs_per_rank": ranks[0]["envs_per_rank"],
            "one_process_envs": one["envs_per_rank"],
            "ranks_bit_identical": all(r["weights"] == ranks[0]["weights"] for r in ranks),
            "max_abs_from_one_process": farthest(ranks[0]["weights"], one["weights"]),
            "orders": [r.get("order") for r in ranks], "one_process_order": one.get("order")}
    for path in sorted(folder.glob("t-*.json")):
        ranks = json.loads(path.read_text())["ranks"]
        out["timing"][path.stem] = [r["update_s"] for r in ranks]
    return out


if __name__ == "__main__":
    print(json.dumps(summary(Path(sys.argv[1])), indent=1))
