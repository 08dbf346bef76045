"""``mapush report RUN``: one page a person can look at, ``RUN/report/index.html``."""
import argparse
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import yaml

from mapush.checkpoints.source import SUCCESS_FILE, parse_success_rate, refuse_inside_run, \
    run_settings
from mapush.common import outputs
from mapush.common.atomic import write_text
from mapush.common.files import read_regular
from mapush.envs.step_record import STEP_RECORD
from mapush.errors import UsageError
from mapush.eval import read_evaluated
from mapush.events import Scalars, event_files, read_scalars
from mapush.objects import mapush_root
from mapush.plots import pyplot, save_figure
from mapush.reproduce import authors_runs

REPORT_DIR = "report"
PAGE = "index.html"
# the panels and the stack's rows (templates/report.yaml)
LAYOUT = yaml.safe_load((Path(__file__).resolve().parent / "templates" / "report.yaml")
                        .read_text())


def _say(text: str) -> None:
    print("mapush report: %s" % text, file=sys.stderr, flush=True)


def _label(ax: Any, title: str, xlabel: str) -> None:
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.tick_params(labelsize=7)


def draw_panel(plt: Any, path: Path, tags: List[str], scalars: Scalars, theirs: Scalars) -> None:
    cols = min(3, len(tags))
    rows = (len(tags) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 2.8 * rows), squeeze=False)
    for ax in axes.flat[len(tags):]:
        ax.axis("off")
    for ax, tag in zip(axes.flat, tags):
        steps, values = zip(*scalars[tag])
        ax.plot(steps, values, "o-", markersize=3, color="tab:blue", label="this run")
        # the authors' tag for ours: OpenRL logged each term under its bare name
        other = theirs.get(tag.split("/", 1)[1] if tag.startswith(("reward/", "train/")) else tag)
        if other:
            ax.plot(*zip(*other), "-", color="tab:orange", alpha=0.8, label="authors")
            ax.legend(fontsize=7)
        _label(ax, tag, "env steps")
    save_figure(plt, fig, path)


def draw_eval(plt: Any, path: Path, records: List[Dict[str, Any]],
              theirs: Dict[int, Dict[str, float]]) -> None:
    keys = ["success_rate", "finished_time", "collision_degree", "collaboration_degree"]
    if any(r.get("obstacle_collision_degree") is not None for r in records):
        keys.append("obstacle_collision_degree")  # the high level (patches/mapush/05)
    fig, axes = plt.subplots(1, len(keys), figsize=(4 * len(keys), 3), squeeze=False)
    for ax, key in zip(axes.flat, keys):
        points = [(r["step"], r[key]) for r in records
                  if r.get(key) is not None and r.get("step") is not None]
        if points:
            ax.plot(*zip(*sorted(points)), "o-", color="tab:blue", label="this run")
        other = sorted((step, f[key]) for step, f in theirs.items() if key in f)
        if other:
            ax.plot(*zip(*other), "s--", color="tab:orange", label="authors")
        if points or other:
            ax.legend(fontsize=7)
        _label(ax, key, "checkpoint (env steps)")
    save_figure(plt, fig, path)


def render(**context: Any) -> str:
    """The page from ``templates/report.html`` (jinja2, every value escaped)."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("mapush", "templates"),
                             autoescape=True, keep_trailing_newline=True)
    env.filters["cell"] = lambda value: "-" if value is None else \
        "%.4g" % value if isinstance(value, float) else str(value)
    return env.get_template("report.html").render(**context)


def build(run: Path, out: Path) -> Path:
    """Write ``out/index.html`` and its PNGs for ``run`` (``out``: main's scratch folder);
    returns the page."""
    try:
        run_config = json.loads((run / "config.json").read_text()) \
            if (run / "config.json").is_file() else {}
    except ValueError as exc:  # a truncated record: say so, not a traceback
        raise UsageError("RUN %s: its config.json is damaged (%s)" % (run, exc))
    logs = run / "logs"
    if not logs.is_dir() or not event_files(logs):
        raise UsageError("%s has no TensorBoard events (%s): train it first (make train), "
                         "or pass a run directory" % (run, logs))
    plt = pyplot()
    _say("reading the events in %s" % logs)
    scalars = read_scalars(logs)
    if not run_config:  # an authors' results folder (make demo): its tags named as ours
        scalars = {t if "/" in t else ("reward/" if t.endswith(("reward", "punishment"))
                                       else "train/") + t: v for t, v in scalars.items()}
    if not any(scalars.values()):
        _say("warning: the event files in %s hold no readable scalars (damaged or empty): "
             "the page has no curves" % logs)
    spec = run_config.get("spec", {})  # the authors' run of the object, for the mid level
    theirs_run = authors_runs(mapush_root() / "results").get(spec.get("object")) \
        if spec.get("task", "go1push_mid") == "go1push_mid" else None
    theirs = read_scalars(theirs_run / "logs") if theirs_run is not None and \
        (theirs_run / "logs").is_dir() else {}
    if theirs_run is not None:
        _say("drawing the authors' curves from %s beside this run's" % theirs_run)
    panels = []  # type: List[Dict[str, str]]
    for name, title, keys in LAYOUT["panels"]:
        tags = sorted(t for t in scalars if scalars[t] and any(
            t == k or (k.endswith("/") and t.startswith(k)) for k in keys))
        if not tags:
            continue
        _say("drawing %s (%d curves)" % (name, len(tags)))
        draw_panel(plt, out / name, tags, scalars, theirs)
        panels.append({"title": title, "image": name})

    records = read_evaluated(run)
    their_table = parse_success_rate((theirs_run / SUCCESS_FILE).read_text()) \
        if theirs_run is not None else {}  # type: Dict[int, Dict[str, float]]
    if records:
        _say("drawing eval.png (%d checkpoints)" % len(records))
        draw_eval(plt, out / "eval.png", records, their_table)

    videos = sorted((run / "videos").glob("*.mp4")) if (run / "videos").is_dir() else []
    summary = run_summary(run_config, run)
    try:  # which of MQE's step graphs the run replayed (mapush/envs/step_record.py)
        summary.append(["MQE's step", json.loads(read_regular(run / STEP_RECORD))["line"]])
    except (OSError, ValueError, KeyError, TypeError):
        summary.append(["MQE's step", "not recorded (the run stopped before its 5th step, or "
                        "predates the record)"])
    if theirs_run is not None:
        summary.append(["authors' run", str(theirs_run)])
    page = render(
        title="MAPush run %s" % run.name, summary=summary, panels=panels,
        evals=[[r.get("step"), r.get("success_rate"), r.get("finished_time"),
                r.get("collision_degree"), r.get("collaboration_degree"),
                r.get("obstacle_collision_degree"), r.get("error")] for r in records],
        eval_head=["step", "success rate", "finished time (s)", "collision degree (upstream's)",
                   "collaboration degree", "obstacle collision degree", "error"],
        eval_command="make eval RUN=%s  (mapush eval --run %s)" % (run, run),
        videos=[v.name for v in videos],
        video_dir=os.path.relpath(str(run / "videos"), str(out)),
        video_command="make video RUN=%s  (mapush eval --checkpoint %s --video)" % (run, run),
        exports=[p.parent.name for p in sorted(run.glob("export/*/policy.json"))],
        export_dir=os.path.relpath(str(run / "export"), str(out)), export_command="make export "
        "RUN=%s  (mapush export --run %s)" % (run, run))
    write_text(out / PAGE, page)
    _say("%s (%d images, %d videos)" % (out / PAGE, len(panels) + bool(records), len(videos)))
    return out / PAGE


def _pinned(pin: Optional[str], installed: Optional[str]) -> Optional[str]:
    """The installed version, with the pin beside it where the two differ."""
    if installed is None:
        return None if pin is None else "%s (pinned; not recorded as installed)" % pin
    if pin is None or installed == pin:
        return installed
    return "%s (pinned: %s)" % (installed, pin)


def run_summary(run_config: Dict[str, Any], run: Optional[Path] = None) -> List[List[Any]]:
    """The Run table: what config.json recorded. Versions as installed (the pin beside where
    they differ); the first start's envs and steps, then each resume's; the command and
    every setting the run changed (its trainer's, its task's)."""
    spec = run_config.get("spec", {})
    command = run_config.get("command")
    settings = run_settings(run, spec) if run is not None else {}
    provenance = run_config.get("provenance", {})
    pins, versions = provenance.get("pins", {}), provenance.get("versions", {})
    patches = ["%s: %s" % (r.get("component"), ", ".join(p.get("name", "?")
                                                           for p in r.get("patches", [])))
               for r in provenance.get("patches", [])]
    resumes = run_config.get("resumes", [])
    start = run_config.get("start") or (None if resumes else spec)
    rows = [["algorithm", spec.get("algo")], ["task", spec.get("task")],
            ["object", spec.get("object")], ["seed", spec.get("seed")],
            ["command", " ".join(shlex.quote(str(a)) for a in ["mapush"] + list(command[1:]))
             if isinstance(command, list) and command else None],
            ["settings changed", "; ".join("%s=%s" % item for item in settings.items())
             or "none: the shipped trainer config and MQE's task config"],
            ["started", "%s envs, --steps %s (%s)" % (start.get("num_envs"), start.get("steps"),
                                                      run_config.get("created"))
             if start else "%s (its envs and steps were not recorded before the first resume)"
             % run_config.get("created")]]  # type: List[List[Any]]
    for k, resume in enumerate(resumes, 1):
        rows.append(["resume %d" % k, "%s envs, --steps %s (%s), from %s"
                     % (resume.get("num_envs", resume.get("spec", {}).get("num_envs")),
                        resume.get("steps", resume.get("spec", {}).get("steps")),
                        resume.get("at"), resume.get("from") or "step 0")])
    rows += [["Python", provenance.get("python")], ["stack", provenance.get("stack")],
             ["MAPush", pins.get("MAPUSH_COMMIT")], ["HARL", pins.get("HARL_COMMIT")]]
    rows += [[label, _pinned(pins.get(pin), versions.get(dist))]
             for label, pin, dist in LAYOUT["stack"]]
    rows += [["patches", "; ".join(patches) or None],
             ["not recorded", "; ".join(provenance.get("incomplete", [])) or None]]
    check = run_config.get("step_check")  # mapush/run/train.py: check_step
    if isinstance(check, dict):
        rows.append(["fast-step check", "%s%s" % (check.get("line"), "" if check.get(
            "fast_step", True) else " (so this run trains with upstream's step: %s)"
            % (check.get("set") or "the spec's fast_step false"))])
    return rows


def main(args: argparse.Namespace) -> int:
    run = Path(args.run)
    if not run.is_dir():
        raise UsageError("RUN %s: no such run directory" % run)
    out = Path(args.out) if args.out else run / REPORT_DIR
    refuse_inside_run("--out", out, run)
    outputs.refuse_foreign(out, is_report, "mapush report", run, manifest=True)
    try:
        with outputs.scratch_beside(out) as partial:
            build(run, partial)
            outputs.replace(partial, out, is_report, "mapush report")
    except OSError as exc:
        raise UsageError("--out %s: cannot create it (%s): pass a writable --out DIR"
                         % (out, exc.strerror or exc))
    print(str(out / PAGE))
    return 0


def is_report(folder: Path) -> bool:
    """A previous result of ``mapush report``: its page's generator tag says so."""
    try:
        head = read_regular(folder / PAGE)[:600]
    except (OSError, ValueError):
        return False
    return 'content="mapush report"' in head  # no title: any page may have one (#77)
