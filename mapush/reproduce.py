"""``mapush reproduce``: the authors' published checkpoints, evaluated beside their table."""
import argparse
import importlib.util
import math
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from tqdm import tqdm

from mapush.checkpoints.source import OBJECT_CONFIG, SUCCESS_FILE, describe, \
    parse_success_rate, upstream_checkpoints
from mapush.errors import ISAACGYM_HINT, MapushError, UsageError
from mapush.eval import METRICS, check_fits, evaluate
from mapush.objects import KNOWN_OBJECTS, mapush_root, read_object_name
from mapush.common import outputs
from mapush.common.atomic import write_json, write_text
from mapush.spec import parse_list

SIGMAS = 3.0


def authors_runs(results: Path) -> Dict[str, Path]:
    """``{object: results folder}`` of the authors' runs that have a success_rate.txt."""
    runs = {}  # type: Dict[str, Path]
    for folder in sorted(results.iterdir()) if results.is_dir() else []:
        config = folder / OBJECT_CONFIG
        if (folder / SUCCESS_FILE).is_file() and config.is_file() and upstream_checkpoints(folder):
            name = read_object_name(config)
            if name:
                runs[name] = folder  # sorted: the newest by name wins
    return runs


def plan(runs: Dict[str, Path], objects: Optional[List[str]], which: str
         ) -> List[Tuple[str, int, Path, Dict[str, float]]]:
    """``(object, step, checkpoint, their figures)`` to evaluate, in order."""
    wanted = objects or [o for o in KNOWN_OBJECTS if o in runs] + \
        sorted(o for o in runs if o not in KNOWN_OBJECTS)
    missing = [o for o in wanted if o not in runs]
    if missing:
        raise UsageError("--objects %s: no authors' results folder (with %s, %s and "
                         "checkpoints/) for it under the results folder; found: %s"
                         % (",".join(missing), OBJECT_CONFIG, SUCCESS_FILE,
                            ", ".join(sorted(runs)) or "none"))
    todo = []
    for obj in wanted:
        theirs = parse_success_rate((runs[obj] / SUCCESS_FILE).read_text())
        steps = [(step, path) for step, path in upstream_checkpoints(runs[obj]) if step in theirs]
        if which == "last3":
            steps = steps[-3:]
        todo += [(obj, step, path, theirs[step]) for step, path in steps]
    if not todo:
        raise UsageError("no checkpoint of %s has a figure in its %s"
                         % (", ".join(wanted), SUCCESS_FILE))
    return todo


def compare(ours: Dict[str, Any], theirs: Dict[str, float], n: int) -> Dict[str, Any]:
    """Differences, and the flag for a success rate outside ``SIGMAS`` binomial standard
    deviations of theirs."""
    p = min(max(theirs["success_rate"], 1.0 / n), 1.0 - 1.0 / n)
    bound = SIGMAS * math.sqrt(p * (1.0 - p) / n)
    diff = {}  # type: Dict[str, Optional[float]]
    for key in METRICS:
        mine, other = ours.get(key), theirs.get(key)
        diff[key] = None if mine is None or other is None else mine - other
    return {"diff": diff, "bound": bound,
            "flagged": abs(ours["success_rate"] - theirs["success_rate"]) > bound}


def step_label(step: int) -> str:
    """A checkpoint's step, short and exact: 10M, 2.5M, 2000, 1000."""
    if step >= 1000000 and step % 100000 == 0:
        return "%gM" % (step / 1000000.0)
    return str(step)


def _fmt(value: Optional[float], digits: int = 3) -> str:
    return "-" if value is None else "%.*f" % (digits, value)


def markdown(rows: List[Dict[str, Any]], settings: Dict[str, Any]) -> str:
    lines = ["# The authors' checkpoints, evaluated here", "",
             "Calculator mode, %d envs, seed %d. Theirs: their `success_rate.txt`. Flagged: "
             "a success rate more than %g binomial standard deviations from theirs."
             % (settings["num_envs"], settings["seed"], SIGMAS), "",
             "| object | checkpoint | success rate (ours / theirs / diff) | finished time s "
             "| collision degree | collaboration degree | flag |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        if "error" in row:
            lines.append("| %s | %s | error: %s | | | | **error** |"
                         % (row["object"], step_label(row["step"]), row["error"]))
            continue
        cells = ["%s / %s / %s" % tuple(_fmt(row[side].get(key)) for side in
                                        ("ours", "theirs", "diff")) for key in METRICS]
        lines.append("| %s | %s | %s | %s | %s | %s | %s |"
                     % (row["object"], step_label(row["step"]), cells[0], cells[1], cells[2],
                        cells[3], "**outside +-%.3f**" % row["bound"] if row["flagged"]
                        else "ok"))
    return "\n".join(lines) + "\n"


def main(args: argparse.Namespace) -> int:
    out = Path(args.out)  # a new folder, or its own previous table: never a user's (#50)
    outputs.refuse_foreign(out, lambda folder: (folder / "table.json").is_file() and (
        folder / "table.md").is_file(), "mapush reproduce")
    results = Path(args.results) if args.results else mapush_root() / "results"
    runs = authors_runs(results)
    if not runs:
        raise UsageError("no authors' results under %s (results/<run>/ with %s, %s and "
                         "checkpoints/rl_model_<N>_steps/): set MAPUSH_ROOT to the MAPush "
                         "checkout, or --results DIR" % (results, OBJECT_CONFIG, SUCCESS_FILE))
    # --objects a b, or a,b; none: every object with an authors' run
    objects = parse_list("--objects", " ".join(args.objects)) if args.objects else None
    todo = plan(runs, objects, args.checkpoints)
    infos = []
    for obj, _step, path, _theirs in todo:
        info = describe(path, obj=obj, object_config=str((runs[obj] / OBJECT_CONFIG).resolve()))
        check_fits(info)
        infos.append(info)
    if importlib.util.find_spec("isaacgym") is None:  # once, not once per checkpoint
        raise MapushError("%s; mapush reproduce evaluates each checkpoint in MQE's simulation "
                          "(nothing was written)" % ISAACGYM_HINT)
    out.mkdir(parents=True, exist_ok=True)
    settings = {"num_envs": args.num_envs, "seed": args.seed, "results": str(results),
                "checkpoints": args.checkpoints, "sigmas": SIGMAS}
    rows = []  # type: List[Dict[str, Any]]
    print("mapush reproduce: %d checkpoint(s) of %s, %d envs each, seed %d -> %s"
          % (len(todo), ", ".join(sorted({t[0] for t in todo})), args.num_envs, args.seed,
             out), file=sys.stderr, flush=True)
    for index, ((obj, step, _path, theirs), info) in enumerate(zip(todo, infos), 1):
        label = "[%d/%d] %s %s" % (index, len(todo), obj, step_label(step))
        with tqdm(total=args.num_envs, desc=label, unit="env", file=sys.stderr,
                  dynamic_ncols=True, leave=False) as bar:  # envs whose first episode ended
            code, result, last = evaluate(info, args,
                                          lambda done, _total, *_step: bar.update(done - bar.n))
        row = {"object": obj, "step": step, "checkpoint": info["checkpoint"],
               "theirs": theirs}  # type: Dict[str, Any]
        if result is None:
            row["error"] = last or "exit status %d" % code
            print("%s: error: %s" % (label, row["error"]), file=sys.stderr, flush=True)
        else:
            row["ours"] = {key: result.get(key) for key in METRICS}
            row.update(compare(row["ours"], theirs, int(result.get("num_envs") or args.num_envs)))
            print("%s: success %.3f (theirs %.3f, %+.3f) finished time %s s (theirs %s) %s"
                  % (label, row["ours"]["success_rate"], theirs["success_rate"],
                     row["diff"]["success_rate"], _fmt(row["ours"]["finished_time"], 2),
                     _fmt(theirs.get("finished_time"), 2),
                     "FLAGGED: outside +-%.3f" % row["bound"] if row["flagged"] else "ok"),
                  file=sys.stderr, flush=True)
        rows.append(row)
        write_json(out / "table.json", {"settings": settings, "rows": rows})
        write_text(out / "table.md", markdown(rows, settings))
    flagged = [r for r in rows if r.get("flagged")]
    failed = [r for r in rows if "error" in r]
    print("mapush reproduce: %d checkpoint(s), %d flagged, %d failed -> %s"
          % (len(rows), len(flagged), len(failed), out / "table.md"), file=sys.stderr)
    return 1 if flagged or failed else 0
