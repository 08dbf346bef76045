"""``mapush sweep``: a grid of runs (algorithms x objects x seeds), one run per grid cell."""
import argparse
import itertools
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional

from mapush.checkpoints.source import RUN_CONFIG
from mapush.checkpoints.store import latest_checkpoint
from mapush.common.atomic import writable, write_json, write_text
from mapush.common.clock import now
from mapush.common.files import read_regular
from mapush.diagnostics import gpu as gpu_facts
from mapush.errors import FIXES, UsageError
from mapush.eval import describe_request, evaluate, read_evaluated
from mapush.objects import KNOWN_OBJECTS, find_objects
from mapush.proc import Supervisor
from mapush.spec import CALCULATOR_SEED, RunSpec, parse_list
from mapush.registry import ALGOS

SWEEP_FILE = "sweep.json"
CELL_FILE = "cell.json"
CELL_KEYS = ("state", "exit", "gpu", "started", "finished")  # what a cell.json holds
CELLS_TSV = "cells.tsv"
GRID_KEYS = ("algos", "objects", "seeds", "task", "steps", "num_envs", "config", "sim_device",
             "rl_device")
SBATCH = Path(__file__).resolve().parent.parent / "cluster" / "sweep.sbatch"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
POLL_S = 0.5


def visible_gpus() -> List[int]:
    """GPU indices this machine shows (``nvidia-smi``; ``MAPUSH_FAKE_GPU`` in tests)."""
    if os.environ.get(gpu_facts.FAKE_ENV):
        return [d.index for d in gpu_facts.gather().devices]
    rows, error = gpu_facts.nvidia_smi_query()
    if rows is None:
        raise UsageError(FIXES["sweep_gpus"] % {"error": error})
    return [row["index"] for row in rows]


class Sweep(object):
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        algos = parse_list("--algo", args.algo)
        bad = [a for a in algos if a not in ALGOS]
        if bad:
            raise UsageError("--algo: %s is not one of %s" % (", ".join(bad), ", ".join(ALGOS)))
        objects = parse_list("--objects", args.objects)
        # On a host whose MAPush tree is in the image only, the known objects stand in.
        found = find_objects() or list(KNOWN_OBJECTS)
        missing = [o for o in objects if o not in found]
        if missing:
            raise UsageError("--objects: %s not in MAPUSH_ROOT's task/ (found: %s)"
                             % (", ".join(missing), ", ".join(found) or "none"))
        seeds = parse_list("--seeds", args.seeds, int)
        for seed in seeds:  # as train's --seed
            RunSpec.check_fields({"seed": seed}, "--seeds %s" % args.seeds)
        self.grid = {"algos": algos, "objects": objects, "seeds": seeds, "task": args.task,
                     "steps": args.steps, "num_envs": args.num_envs,
                     # as given: relative to the repository, which is /work in the image
                     "config": args.config,
                     "sim_device": args.sim_device, "rl_device": args.rl_device}
        shown = "-".join(map(str, seeds)) if len(seeds) <= 8 else \
            "%d..%d-n%d" % (min(seeds), max(seeds), len(seeds))  # a folder name has a limit
        name = args.name or "%s_%s_seeds%s" % ("-".join(algos), "-".join(objects), shown)
        if not _NAME.match(name) or len(name) > 200 or set(name) == {"."}:
            raise UsageError("--name %r: use at most 200 letters, digits, '.', '_' and '-'" % name)
        self.name = name
        if any(ord(c) < 32 for c in str(args.root)):  # the Slurm cell table is tab-separated
            raise UsageError("--root %r holds a tab, a newline or another control character; "
                             "pass a --root without one" % str(args.root))
        self.dir = Path(args.root) / name
        self.path = self.dir / SWEEP_FILE
        self.record = self._load()

    @staticmethod
    def read(path: Path) -> Dict[str, Any]:
        """A sweep's record; one line when it is damaged or none of mapush sweep's."""
        try:
            record = json.loads(read_regular(path))
        except (OSError, ValueError) as exc:
            raise UsageError(FIXES["sweep_damaged"] % {"path": path, "exc": exc})
        shaped = isinstance(record, dict) and isinstance(record.get("grid"), dict) and \
            all(k in record["grid"] for k in GRID_KEYS) and isinstance(record.get("cells"), list)
        if not shaped or not all(isinstance(c, dict) and all(isinstance(c.get(k), str) for k in
                                 ("name", "state", "run_dir")) for c in record["cells"]):
            raise UsageError("%s is no record of mapush sweep; pass another --name" % path)
        return record

    def _load(self) -> Dict[str, Any]:
        if self.dir.is_symlink():
            raise UsageError("%s is a symbolic link; pass another --root or --name" % self.dir)
        if self.path.is_file():
            record = self.read(self.path)
            before = record["grid"]
            changed = [k for k in GRID_KEYS if before.get(k) != self.grid[k]]
            if changed:
                raise UsageError("sweep %s exists with another grid (%s: %s there): pass "
                                 "another --name, or the same grid"
                                 % (self.name, ", ".join(changed),
                                    "; ".join(str(before.get(k)) for k in changed)))
            return record
        if self.dir.exists() and (not self.dir.is_dir() or any(self.dir.iterdir())):
            raise UsageError(FIXES["not_a_sweep"] % {"dir": self.dir, "file": SWEEP_FILE})
        names = {cell: "%s-%s-seed%d" % cell for cell in itertools.product(
            self.grid["algos"], self.grid["objects"], self.grid["seeds"])}
        cells = [{"name": name, "algo": algo, "object": obj, "seed": seed,
                  "run_dir": str(self.dir / name), "state": "pending"}
                 for (algo, obj, seed), name in names.items()]
        return {"name": self.name, "grid": self.grid, "created": now(), "cells": cells}

    def save(self) -> None:
        new = None  # the first folder of --root/NAME this save makes
        for folder in [self.dir] + list(self.dir.parents):
            if folder.exists():
                break
            new = folder
        try:
            write_json(self.path, self.record)  # (its folders made as needed)
        except OSError:
            if new is not None:  # a full disk at the first save leaves no empty folder behind
                shutil.rmtree(str(new), ignore_errors=True)
            raise

    # -- a cell ---------------------------------------------------------------------------
    def spec_file(self, cell: Dict[str, Any]) -> Path:
        """The cell's options for ``mapush train --spec`` (a new run, or its run resumed
        with them), written beside the sweep's record; paths stay as given, relative to
        where the runs are (``/work`` in the image), so a container reads them alike."""
        options = {"algo": cell["algo"], "task": self.grid["task"], "object": cell["object"],
                   "seed": cell["seed"], "run_dir": cell["run_dir"],
                   "sim_device": self.grid["sim_device"], "rl_device": self.grid["rl_device"]}
        for key in ("steps", "num_envs", "config"):
            if self.grid[key] is not None:
                options[key] = self.grid[key]
        path = self.dir / "cells" / ("%s.json" % cell["name"])
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, options)
        return path

    def train_args(self, cell: Dict[str, Any]) -> List[str]:
        return ["train", "--spec", str(self.spec_file(cell))]

    def refresh(self) -> None:
        """Cell states from the cells' own ``cell.json`` (what Slurm tasks wrote); a damaged
        one is one line, and its cell keeps the state ``sweep.json`` gives it."""
        for cell in self.record["cells"]:
            mine = Path(cell["run_dir"]) / CELL_FILE
            if not os.path.lexists(str(mine)):
                continue
            try:
                found = json.loads(read_regular(mine))
                if not isinstance(found, dict) or not isinstance(found.get("state"), str):
                    raise ValueError("not a record of a cell's state")
            except (OSError, ValueError) as exc:
                print("warning: %s is damaged (%s); showing the state sweep.json holds"
                      % (mine, exc), file=sys.stderr)
                continue
            cell.update((k, found[k]) for k in CELL_KEYS if k in found)

    def status(self) -> int:
        self.refresh()
        print("sweep %s (%s): %s" % (self.name, self.record.get("executor", "not started"),
                                     self.path))
        width = max(len(c["name"]) for c in self.record["cells"])
        for cell in self.record["cells"]:
            print("  %-*s  %-8s %s%s" % (width, cell["name"], cell["state"],
                                         "gpu %s " % cell["gpu"] if "gpu" in cell else "",
                                         "exit %s" % cell["exit"] if "exit" in cell else ""))
        counts = Counter(cell["state"] for cell in self.record["cells"])
        print("  " + ", ".join("%d %s" % (n, s) for s, n in sorted(counts.items())))
        return 0

    # -- local ----------------------------------------------------------------------------
    def run_local(self) -> int:
        # every cell on the CPU: no GPU to list (nvidia-smi may be absent); --per-gpu at once
        cpu = not self.args.gpus and "cuda" not in self.args.sim_device + self.args.rl_device
        gpus = ["cpu"] if cpu else parse_list("--gpus", self.args.gpus, int) \
            if self.args.gpus else visible_gpus()  # type: List[Any]
        shown = gpus if cpu or not self.args.gpus else visible_gpus()
        unknown = [g for g in gpus if g not in shown]
        if unknown:
            raise UsageError("--gpus: GPU %s not shown by nvidia-smi (it shows %s)"
                             % (", ".join(map(str, unknown)), ", ".join(map(str, shown))
                                or "none"))
        if not gpus:
            raise UsageError("--gpus: this machine shows no GPU")
        self.record["executor"] = "local"
        todo = [c for c in self.record["cells"] if c["state"] != "done"]
        for cell in self.record["cells"]:
            if cell["state"] == "done":
                print("mapush sweep: %s: done, skipped" % cell["name"], file=sys.stderr)
        free = [gpu for gpu in gpus for _slot in range(self.args.per_gpu)]
        raw = self.args.runner or os.environ.get("MAPUSH_SWEEP_RUNNER")
        try:
            runner = shlex.split(raw) if raw else [sys.executable, "-m", "mapush"]
        except ValueError as exc:  # unbalanced quotes
            raise UsageError("--runner (or MAPUSH_SWEEP_RUNNER) %r: %s" % (raw, exc))
        running = []  # type: List[Any]  # (gpu, process, cell)

        sup = Supervisor("mapush sweep", "every running cell stops with a checkpoint; run the "
                         "sweep again to resume")
        self.save()
        with sup:
            while (todo and not sup.stopping) or running:
                while todo and free and not sup.stopping:
                    gpu, cell = free.pop(0), todo.pop(0)
                    argv = self.train_args(cell)
                    env = dict(os.environ, CUDA_VISIBLE_DEVICES="" if cpu else str(gpu),
                               GPU=str(gpu))
                    command = [part.replace("{gpu}", str(gpu)) for part in runner] + argv
                    print("mapush sweep: %s on %s: %s" % (cell["name"], "the CPU" if cpu else
                                                          "GPU %d" % gpu, " ".join(command)),
                          file=sys.stderr, flush=True)
                    cell.update(state="running", gpu=gpu, started=now(),
                                command=["mapush"] + argv, spec=argv[-1],
                                resumed=(Path(cell["run_dir"]) / RUN_CONFIG).is_file())
                    cell.pop("finished", None)
                    cell.pop("exit", None)
                    self.save()
                    running.append((gpu, sup.start(command, env=env), cell))
                time.sleep(POLL_S)
                sup.poll()
                for gpu, proc, cell in list(running):
                    code = proc.poll()
                    if code is None:
                        continue
                    running.remove((gpu, proc, cell))
                    free.append(gpu)
                    sup.children.remove(proc)
                    state = "stopped" if sup.stopping else ("done" if code == 0 else "failed")
                    cell.update(state=state, exit=code, finished=now())
                    if Path(cell["run_dir"]).is_dir():
                        write_json(Path(cell["run_dir"]) / CELL_FILE,
                                   {k: cell[k] for k in CELL_KEYS})
                    self.save()
                    print("mapush sweep: %s %s (exit %d)" % (cell["name"], state, code),
                          file=sys.stderr, flush=True)
        self.status()
        failed = [c for c in self.record["cells"] if c["state"] == "failed"]
        return 1 if failed and not sup.stopping else 0

    # -- slurm ----------------------------------------------------------------------------
    def run_slurm(self) -> int:
        sbatch = shutil.which("sbatch")
        if sbatch is None:
            raise UsageError("--executor slurm: no sbatch on this machine (submit from a Slurm "
                             "login node; docs/cluster.md)")
        try:  # before anything is written
            options = shlex.split(os.environ.get("MAPUSH_SLURM_OPTIONS", ""))
        except ValueError as exc:  # unbalanced quotes
            raise UsageError("MAPUSH_SLURM_OPTIONS: %s; quote it as a shell would" % exc)
        script = Path(os.environ.get("MAPUSH_SBATCH_SCRIPT", str(SBATCH)))
        cells = [c for c in self.record["cells"] if c["state"] != "done"]
        table = self.dir / CELLS_TSV
        write_text(table, "".join("%d\t%s\t%s\n" % (i, c["name"], c["run_dir"])
                                  for i, c in enumerate(cells)))
        for index, cell in enumerate(cells):
            write_text(self.dir / ("cell-%d.args" % index),
                       "\n".join(self.train_args(cell)) + "\n")
        command = [sbatch, "--parsable", "--array=0-%d" % (len(cells) - 1),
                   "--job-name=mapush-%s" % self.name,
                   "--output=%s" % (self.dir / "slurm-%A_%a.out")]
        gres = os.environ.get("MAPUSH_SLURM_GRES", "gpu:1")
        if gres:
            command.append("--gres=%s" % gres)
        command += options
        command += [str(script), str(table.resolve())]
        proc = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True)
        if proc.returncode != 0:
            raise UsageError("sbatch refused the sweep: %s" % (proc.stderr.strip() or
                                                               proc.stdout.strip()))
        job = proc.stdout.strip().split(";")[0]
        self.record["executor"] = "slurm"
        self.record.setdefault("slurm_jobs", []).append({"job_id": job, "submitted": now(),
                                                         "cells": [c["name"] for c in cells]})
        for index, cell in enumerate(cells):
            cell.update(state="submitted", slurm="%s_%d" % (job, index))
        self.save()
        print("mapush sweep: submitted %d cell(s) as Slurm job array %s; watch with "
              "'mapush sweep --status --name %s' or squeue -j %s"
              % (len(cells), job, self.name, job), file=sys.stderr)
        return 0


def main(args: argparse.Namespace) -> int:
    looking = args.status or args.report
    if looking and not (args.name or args.seeds):
        raise UsageError("--status and --report need --name NAME (or the grid's options)")
    if looking and args.name and not args.seeds:
        path = Path(args.root) / args.name / SWEEP_FILE
        if not path.is_file():
            raise UsageError("--status --name %s: no %s" % (args.name, path))
        grid = Sweep.read(path)["grid"]
        vars(args).update({key: grid[key] for key in GRID_KEYS[3:]})
        args.algo, args.objects = ",".join(grid["algos"]), ",".join(grid["objects"])
        args.seeds = ",".join(str(s) for s in grid["seeds"])
    sweep = Sweep(args)
    if args.status:
        return sweep.status()
    if not writable(sweep.dir):
        raise UsageError("--root %s: not writable (a read-only file system, or a folder that "
                         "is not yours); pass a --root you may write" % args.root)
    if args.report:
        sweep.refresh()
        return report(sweep, args)
    if args.executor == "slurm":
        return sweep.run_slurm()
    return sweep.run_local()


# -- the report over seeds ----------------------------------------------------------------
def cell_result(sweep: Sweep, cell: Dict[str, Any], args: argparse.Namespace
                ) -> Optional[Dict[str, Any]]:
    """The cell's final checkpoint's metrics: its eval.jsonl's line for it, else evaluated
    now (:func:`mapush.eval.evaluate`, MAPush's calculator, as ``mapush eval``)."""
    run = Path(cell["run_dir"])
    latest = latest_checkpoint(run) if run.is_dir() else None
    if latest is None:
        return None
    for line in read_evaluated(run):
        if Path(line.get("checkpoint", "")).resolve() == latest[1].resolve() and \
                line.get("success_rate") is not None:
            return line
    print("mapush sweep: evaluating %s" % latest[1], file=sys.stderr, flush=True)
    options = argparse.Namespace(num_envs=args.eval_envs, seed=CALCULATOR_SEED,
                                 sim_device=sweep.grid["sim_device"],
                                 rl_device=sweep.grid["rl_device"])
    code, result, last = evaluate(describe_request(str(latest[1]), options), options, echo=True)
    return result if result is not None else {"error": last or "exit status %d" % code}


def _mean_std(values: List[float]) -> Dict[str, Any]:
    """Mean and sample standard deviation (0 for one seed)."""
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return {"mean": statistics.mean(values), "std": std, "n": len(values)}


def report(sweep: Sweep, args: argparse.Namespace) -> int:
    """Success rate and finished time, mean and sample std over seeds, per object and
    algorithm: ``report/table.md``, ``table.json`` and ``success.png`` in the sweep folder."""
    rows = {}  # type: Dict[tuple, Dict[str, List[float]]]
    missing = []
    for cell in sweep.record["cells"]:
        result = cell_result(sweep, cell, args)
        if not result or result.get("success_rate") is None:
            missing.append(cell["name"])
            continue
        key = (cell["object"], cell["algo"])
        row = rows.setdefault(key, {"success_rate": [], "finished_time": [], "seeds": []})
        row["success_rate"].append(float(result["success_rate"]))
        row["finished_time"].append(float(result["finished_time"]))
        row["seeds"].append(cell["seed"])
    if not rows:
        raise UsageError("sweep %s: no cell has a checkpoint yet (run the sweep first)"
                         % sweep.name)
    out = sweep.dir / "report"
    out.mkdir(parents=True, exist_ok=True)
    table = [{"object": obj, "algo": algo, "seeds": row["seeds"],
              "success_rate": _mean_std(row["success_rate"]),
              "finished_time": _mean_std(row["finished_time"])}
             for (obj, algo), row in sorted(rows.items())]
    write_json(out / "table.json", {"sweep": sweep.name, "rows": table, "missing": missing})
    lines = ["# Sweep %s" % sweep.name, "",
             "Final checkpoint of each cell, MAPush's calculator; mean +- sample std over seeds.",
             "", "| object | algorithm | seeds | success rate | finished time (s) |",
             "| --- | --- | --- | --- | --- |"]
    for row in table:
        lines.append("| %s | %s | %s | %.3f +- %.3f | %.2f +- %.2f |" % (
            row["object"], row["algo"], ",".join(map(str, row["seeds"])),
            row["success_rate"]["mean"], row["success_rate"]["std"],
            row["finished_time"]["mean"], row["finished_time"]["std"]))
    if missing:
        lines += ["", "Not in the table (no checkpoint or no metrics yet): %s"
                  % ", ".join(missing)]
    write_text(out / "table.md", "\n".join(lines) + "\n")
    from mapush.plots import pyplot, save_figure

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    labels = ["%s\n%s" % (r["object"], r["algo"]) for r in table]
    for ax, key, title in ((axes[0], "success_rate", "success rate"),
                           (axes[1], "finished_time", "finished time (s)")):
        ax.bar(range(len(table)), [r[key]["mean"] for r in table],
               yerr=[r[key]["std"] for r in table], capsize=4, color="tab:blue")
        ax.set_xticks(range(len(table)))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_title("%s (mean +- std over seeds)" % title, fontsize=9)
    save_figure(plt, fig, out / "success.png")
    print(str(out / "table.md"))
    print("mapush sweep: %s, %s" % (out / "table.md", out / "success.png"), file=sys.stderr)
    return 0
