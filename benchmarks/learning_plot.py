"""The success curves of ``benchmarks/learning.py``'s records, drawn into one PNG (#48).

    python benchmarks/learning_plot.py [--out benchmarks/results/learning-cuboid.png] \
        [RECORD.json ...]     # default: benchmarks/results/learning-*.json

Each record's success rate per update (the run's rolling window of finished episodes) against
env steps, one line a record, labelled with its algorithm and config. Not PhysX: every curve
is over the Isaac Gym stand-in, and the figure's title says so.
"""
import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from mapush.plots import pyplot, save_figure  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"


def label(record: dict, path: Path) -> str:
    config = "the authors' config" if "authors-config" in path.stem or \
        record.get("object_config") else "task/%s/config.py" % record["object"]
    world = ", %s" % record["world"] if record.get("world") else ""
    return "%s, %s (%d envs%s)" % (record["algo"].upper(), config, record["num_envs"], world)


def draw(records: list, out: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for path in records:
        record = json.loads(path.read_text())
        points = [(step / 1e6, value) for step, value, _fps in record["success"]
                  if value is not None]
        line, = ax.plot([p[0] for p in points], [p[1] for p in points], label=label(record, path))
        rows = record["success"]
        for before, row in zip(rows, rows[1:]):  # a resume: its window of episodes starts empty
            if before[1] is not None and row[1] is None:
                ax.axvline(row[0] / 1e6, color=line.get_color(), linestyle=":", alpha=0.7)
                ax.annotate("resumed: its first few episodes", (row[0] / 1e6, 0.45),
                            fontsize=7, color=line.get_color(), ha="left")
    ax.set_title("Success rate while training the cuboid push, over the Isaac Gym stand-in "
                 "(not PhysX)", fontsize=10)
    ax.set_xlabel("env steps (millions)")
    ax.set_ylabel("success rate (recent episodes)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save_figure(plt, fig, out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("records", nargs="*", help="learning.py records (default: %s)"
                        % (RESULTS / "learning-*.json"))
    parser.add_argument("--out", default=str(RESULTS / "learning-cuboid.png"))
    args = parser.parse_args(argv)
    records = [Path(p) for p in args.records] or sorted(RESULTS.glob("learning-*.json"))
    if not records:
        print("error: no learning-*.json records in %s: run benchmarks/learning.py first"
              % RESULTS, file=sys.stderr)
        return 2
    draw(records, Path(args.out))
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
