"""``mapush pipeline``: MAPush's whole method for one object, in four resumable stages."""
import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Dict

from mapush.checkpoints.source import RUN_CONFIG
from mapush.checkpoints.store import latest_checkpoint
from mapush.common.atomic import write_json
from mapush.common.clock import now
from mapush.errors import MapushError, UsageError
from mapush.eval import EVAL_FILE, evaluate_run, read_evaluated
from mapush.objects import find_objects
from mapush.proc import Supervisor
from mapush.spec import MID, UPPER, check_upper_object
from mapush.registry import DEFAULT_ALGO

PIPELINE_FILE = "pipeline.json"
STAGES = ("mid", "eval-mid", "upper", "eval-upper")
SETTINGS = ("object", "seed", "num_envs", "upper_num_envs", "mid_steps", "upper_steps",
            "eval_envs", "sim_device", "rl_device", "config", "upper_config", "set", "upper_set")


class Pipeline(object):
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.dir = Path(args.dir or Path("runs") / "pipeline" / args.object /
                        ("seed%d" % args.seed))
        self.path = self.dir / PIPELINE_FILE
        self.settings = {key: getattr(args, key) for key in SETTINGS}
        self.sup = Supervisor("mapush pipeline", "the running stage stops with a checkpoint; "
                              "run the pipeline again to resume")
        self.record = self._load()

    # -- the record ---------------------------------------------------------------------
    def _load(self) -> Dict[str, Any]:
        if self.path.is_file():
            record = json.loads(self.path.read_text())
            before = record.get("settings", {})
            changed = sorted(k for k in SETTINGS if before.get(k) != self.settings[k])
            if changed:
                raise UsageError(
                    "%s was made with other settings (%s): run it with those, or pass "
                    "another --dir" % (self.path, "; ".join(
                        "%s: %s there, %s now" % (k, before.get(k), self.settings[k])
                        for k in changed)))
            return record
        return {"settings": self.settings, "created": now(),
                "stages": [{"name": name, "state": "pending"} for name in STAGES]}

    def save(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        write_json(self.path, self.record)

    def stage(self, name: str) -> Dict[str, Any]:
        return next(s for s in self.record["stages"] if s["name"] == name)

    # -- running a stage ----------------------------------------------------------------
    def run_stage(self, name: str, work: Callable[[], int], result: Callable[[], Any]) -> bool:
        """Run one stage; True when it finished (then ``result()`` is recorded)."""
        stage = self.stage(name)
        stage.update(state="running", started=now())
        for key in ("finished", "exit", "error"):
            stage.pop(key, None)
        self.save()
        try:
            code = work()
        except MapushError as exc:
            print("error: %s" % exc, file=sys.stderr, flush=True)
            code, stage["error"] = exc.exit_code, str(exc)
        stage.update(exit=code, finished=now())
        if self.sup.stopping:
            stage["state"] = "stopped"
        elif code != 0:
            stage["state"] = "failed"
        else:
            stage.update(state="done", result=result())
        self.save()
        return stage["state"] == "done"

    def train(self, run: str, options: Dict[str, Any]) -> int:
        """``mapush train --spec <dir>/specs/<run>.json`` in a child: a new run, or the
        stopped one in ``<dir>/<run>`` resumed with the same options."""
        path, done = self.dir / "specs" / ("%s.json" % run), self.dir / run / RUN_CONFIG
        options = {k: v for k, v in options.items() if k != "set" or v and not done.is_file()}
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, dict(options, algo=DEFAULT_ALGO, object=self.args.object,
                              run_dir=str(self.dir / run), **self._devices()))
        self.stage(run)["command"] = ["mapush", "train", "--spec", str(path)]
        self.save()
        print("mapush pipeline: $ mapush train --spec %s" % path, file=sys.stderr, flush=True)
        return self.sup.wait(self.sup.start([sys.executable, "-m", "mapush", "train",
                                             "--spec", str(path)]))

    def evaluate(self, run: str) -> int:
        """Every checkpoint of ``<dir>/<run>`` into its ``eval.jsonl`` (one calculator
        child per checkpoint, :func:`mapush.eval.evaluate_run`); a stop signal ends it."""
        options = dict(self._devices(), num_envs=self.args.eval_envs)
        self.stage("eval-" + run).update(evaluated=str(self.dir / run), options=options)
        self.save()
        return evaluate_run(self.dir / run, argparse.Namespace(**options), self.sup)

    def _devices(self) -> Dict[str, Any]:
        return {"sim_device": self.args.sim_device, "rl_device": self.args.rl_device,
                "seed": self.args.seed}

    # -- the four stages ----------------------------------------------------------------
    def mid(self) -> int:
        return self.train("mid", {"task": MID, "num_envs": self.args.num_envs, "set": self.args.set,
                                  "steps": self.args.mid_steps, "config": self.args.config})

    def best_mid(self) -> Dict[str, Any]:
        lines = read_evaluated(self.dir / "mid")
        scored = [r for r in lines if r.get("success_rate") is not None]
        if not scored:
            raise UsageError("no mid-level checkpoint could be evaluated (see %s)"
                             % (self.dir / "mid" / EVAL_FILE))
        best = max(scored, key=lambda r: (r["success_rate"], r.get("step") or 0))
        return {"best_checkpoint": best["checkpoint"], "step": best.get("step"),
                "success_rate": best["success_rate"], "evaluated": len(lines)}

    def upper(self) -> int:
        best = self.stage("eval-mid")["result"]["best_checkpoint"]
        return self.train("upper", {"task": UPPER, "command_net": best,
                                    "num_envs": self.args.upper_num_envs,
                                    "steps": self.args.upper_steps,
                                    "config": self.args.upper_config, "set": self.args.upper_set})

    def trained(self, run: str) -> Dict[str, Any]:
        latest = latest_checkpoint(self.dir / run)
        return {"run_dir": str(self.dir / run),
                "checkpoint": str(latest[1]) if latest else None,
                "step": latest[0] if latest else None}

    def run(self) -> int:
        plan = [("mid", self.mid, lambda: self.trained("mid")),
                ("eval-mid", lambda: self.evaluate("mid"), self.best_mid),
                ("upper", self.upper, lambda: self.trained("upper")),
                ("eval-upper", lambda: self.evaluate("upper"),
                 lambda: (read_evaluated(self.dir / "upper") or [{}])[-1])]
        with self.sup:
            self.save()
            for index, (name, work, result) in enumerate(plan, 1):
                stage = self.stage(name)
                if stage["state"] == "done":
                    print("mapush pipeline: [%d/4] %s: done, skipped" % (index, name),
                          file=sys.stderr, flush=True)
                    continue
                print("mapush pipeline: [%d/4] %s%s" % (index, name, " (resuming)"
                                                        if stage["state"] != "pending" else ""),
                      file=sys.stderr, flush=True)
                if not self.run_stage(name, work, result):
                    state = stage["state"]
                    print("%s: stage %s %s (exit %s); %s" % (
                        "mapush pipeline" if state == "stopped" else "error",
                        name, state, stage.get("exit"),
                        "run the pipeline again to resume it" if state == "stopped"
                        else "fix the cause above and run the pipeline again to retry it"),
                        file=sys.stderr, flush=True)
                    return 0 if state == "stopped" else 1
        final = self.stage("eval-upper").get("result", {})
        print("mapush pipeline: done: %s; the hierarchy: success rate %s, finished time %s s, "
              "collision degree %s" % (self.path, final.get("success_rate"),
                                       final.get("finished_time"), final.get("collision_degree")),
              file=sys.stderr)
        return 0


def main(args: argparse.Namespace) -> int:
    objects = find_objects()  # the object must be one the high level pushes (mapush/spec.py)
    if args.object not in objects:
        raise UsageError("--object %s: not in MAPUSH_ROOT's task/ (found: %s)"
                         % (args.object, ", ".join(objects) or "none"))
    check_upper_object(args.object)
    for key in ("config", "upper_config"):
        value = getattr(args, key)
        if value:
            setattr(args, key, str(Path(value).resolve()))
    if args.dir:
        args.dir = str(Path(args.dir))
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    return Pipeline(args).run()
