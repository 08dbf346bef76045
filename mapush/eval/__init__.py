"""``mapush eval``: the paper's metrics of a checkpoint (MAPush's calculator mode), each in a
fresh child (:mod:`mapush.eval.calculator`, given an :class:`mapush.spec.EvalSpec` file).
The metrics, the outputs and why a child: docs/openrl.md, "Evaluation"."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from tqdm import tqdm

from mapush import schema
from mapush.checkpoints.policy import input_dim
from mapush.checkpoints.source import describe, refuse_inside_run, resolve, run_checkpoints
from mapush.checkpoints.store import checkpoints_dir
from mapush.common.atomic import writable, write_json, write_text
from mapush.common.files import read_regular
from mapush.diagnostics.doctor import in_container, require_devices
from mapush.diagnostics.rendering import problems
from mapush.errors import MapushError, UsageError
from mapush.objects import ConfigReadError, check_object_name, object_config_path, \
    objects_with_obs_dim, read_object_facts
from mapush.proc import Supervisor, signal_name
from mapush.spec import CALCULATOR_NUM_ENVS, UPPER, UPPER_OBJECT, UPPER_OBS_DIM, EvalSpec, \
    check_upper_object

EVAL_FILE = "eval.jsonl"
VIDEO_DIR = "videos"
PROGRESS = "mapush-progress"  # "mapush-progress DONE TOTAL" from the child (no runpy warning)
# The paper's four (openrl_ws/test.py:136-146), then the obstacle collision degree of
# patches/mapush/05 (upstream's collision degree counts the final target and one obstacle in
# the high level: docs/upstream.md).
METRICS = ("success_rate", "finished_time", "collision_degree", "collaboration_degree",
           "obstacle_collision_degree")


# -- parent side: which checkpoint, which run -------------------------------------------
def check_fits(info: Dict[str, Any], what: str = "--checkpoint") -> None:
    """The checkpoint's input dim against the obs dim of the env it would run in, before a
    simulation starts: a mismatch names both dims and the objects that would fit."""
    if info.get("task") == UPPER:
        dim = input_dim(info["checkpoint"])
        if dim != UPPER_OBS_DIM:
            raise UsageError("%s %s takes %d-dim observations; the high level (%s) gives %d"
                             % (what, info["checkpoint"], dim, UPPER, UPPER_OBS_DIM))
        return
    config = Path(info["object_config"]) if info.get("object_config") else \
        object_config_path(info["object"])
    try:
        facts = read_object_facts(config)
    except ConfigReadError as exc:
        raise UsageError("%s %s: %s" % (what, info["checkpoint"], exc))
    dim = input_dim(info["checkpoint"])
    if dim != facts.obs_dim:
        fits = objects_with_obs_dim(dim)
        raise UsageError(
            "%s %s takes %d-dim observations, but %s (%s, %d robots) gives %d: %s"
            % (what, info["checkpoint"], dim, info["object"], config, facts.num_agents,
               facts.obs_dim, "it fits --object %s" % " or --object ".join(fits) if fits
               else "no object under MAPUSH_ROOT has %d-dim observations" % dim))


def describe_request(target: str, args: argparse.Namespace) -> Dict[str, Any]:
    """``--checkpoint PATH``: the checkpoint and what rebuilds its env, checked to fit."""
    info = describe_checkpoint(resolve(target, "--checkpoint"), args)
    check_fits(info)
    return info


def describe_checkpoint(checkpoint: Path, args: argparse.Namespace) -> Dict[str, Any]:
    """What rebuilds the checkpoint's env, with eval's ``--task``, ``--object``,
    ``--object-config`` and ``--command-net`` applied and checked."""
    task = getattr(args, "task", None)
    obj = getattr(args, "object", None)
    config = getattr(args, "object_config", None)
    config = str(Path(config).resolve()) if config else None
    if obj is not None and config is None:
        check_object_name(obj)
    if task == UPPER and obj is None and config is None:
        obj = UPPER_OBJECT  # the high level's object (mapush/spec.py)
    info = describe(checkpoint, obj=obj, object_config=config)
    if task is not None:
        trained = info.get("trained_task")
        if trained and trained != task:
            raise UsageError("--task %s: %s was trained on --task %s" % (task, checkpoint,
                                                                           trained))
        info["task"] = task
    command_net = getattr(args, "command_net", None)
    if info["task"] != UPPER:
        if command_net:
            raise UsageError("--command-net is for a high-level policy (--task %s)" % UPPER)
        return info
    check_upper_object(info["object"], config)
    info["object_config"] = None  # the upper task builds its object from MQE's config
    if command_net or not info.get("command_net"):
        from mapush.checkpoints.command_net import resolve_command_net

        info["command_net"] = resolve_command_net(command_net)
    elif not Path(info["command_net"]).is_file():
        raise UsageError("%s drove the mid-level policy %s, which is gone: pass --command-net "
                         "PATH" % (checkpoint, info["command_net"]))
    return info


def evaluate(info: Dict[str, Any], args: argparse.Namespace,
             on_progress: Optional[Callable[..., None]] = None, echo: bool = False,
             sup: Optional[Supervisor] = None) -> Tuple[int, Optional[Dict[str, Any]], str]:
    """One evaluation child: ``(exit status, result or None, last stderr line)``
    (docs/architecture.md, "Modules")."""
    with tempfile.TemporaryDirectory(prefix="mapush-eval-") as folder:
        spec = EvalSpec.from_dict(dict(info, num_envs=args.num_envs, sim_device=args.sim_device,
                                       rl_device=args.rl_device, seed=args.seed,
                                       scratch=str(Path(folder) / "scratch"),
                                       progress=on_progress is not None))
        Path(spec.scratch).mkdir()
        path = Path(folder) / "eval-spec.json"
        write_json(path, spec.to_dict())
        argv = [sys.executable, "-m", "mapush.eval.calculator", str(path)]
        pipes = dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        sup = sup or Supervisor("mapush eval", "")  # signals stay with the caller's handlers
        proc = sup.start(argv, **pipes)
        last = ""
        assert proc.stderr is not None and proc.stdout is not None
        try:
            for line in proc.stderr:
                if line.startswith(PROGRESS):
                    if on_progress is not None:
                        on_progress(*(int(word) for word in line.split()[1:]))
                    continue
                if echo:
                    sys.stderr.write(line)
                if line.strip():
                    last = line.strip()
            out = proc.stdout.read()
            code = sup.wait(proc)
        finally:  # a stop raised above: the child ends before its scratch folder goes
            proc.kill()
            proc.wait()
    if code < 0:
        return code, None, "error: the evaluation process died from %s" % signal_name(-code)
    if code != 0:
        return code, None, last
    lines = [line for line in out.splitlines() if line.strip()]
    try:
        return 0, json.loads(lines[-1]), last
    except (IndexError, ValueError):
        return 1, None, "error: the evaluation process printed no result"


def read_evaluated(run_dir: Path) -> List[Dict[str, Any]]:
    """The records of ``run_dir/eval.jsonl`` (``--run``'s output), oldest first; none when
    the run was not evaluated, or its file is damaged (said in one line)."""
    path = Path(run_dir) / EVAL_FILE
    records = eval_records(path) if path.exists() else []
    if records is None:
        print("warning: %s is damaged: its evaluations are left out" % path, file=sys.stderr)
    return records or []


def eval_output(run_dir: Path, out: Optional[str]) -> Path:
    """``--out FILE``, else ``DIR/eval.jsonl``, which must be writable (the image's
    /opt/mapush is not)."""
    if out:
        path = Path(out)
        refuse_inside_run("--out", path, run_dir)
        if path.exists() and eval_records(path) is None:
            raise UsageError("--out %s exists and is no result of mapush eval (a *.jsonl of "
                             "its records, one per checkpoint); pass a new file: an eval "
                             "replaces only its own previous result" % out)
        if not path.parent.is_dir() or not os.access(str(path.parent), os.W_OK):
            raise UsageError("--out %s: its folder %s does not exist or is not writable"
                             % (out, path.parent))
        return path
    if not os.access(str(run_dir), os.W_OK):
        raise UsageError("--run %s is read-only: pass --out FILE (e.g. --out runs/%s-eval.jsonl)"
                         % (run_dir, run_dir.name))
    return run_dir / EVAL_FILE


def eval_records(path: Path) -> Optional[List[Dict[str, Any]]]:
    """The records of a result of ``mapush eval --run`` (a regular ``*.jsonl``, a checkpoint's
    record a line, or empty); None: ``path`` is not one."""
    if path.suffix != ".jsonl" or path.is_symlink():
        return None
    try:
        records = [json.loads(line) for line in read_regular(path).splitlines() if line.strip()]
    except (OSError, ValueError):
        return None
    return records if all(isinstance(r, dict) and "checkpoint" in r for r in records) else None


def rrt_figures(folder: Path, info: Dict[str, Any]) -> str:
    """Where a high-level checkpoint's RRT figures go under ``folder``: ``rrt/<checkpoint>/``."""
    return str(Path(folder).resolve() / "rrt" / Path(info["checkpoint"]).name)


def evaluate_run(run_dir: Path, args: argparse.Namespace, sup: Supervisor) -> int:
    """Every complete checkpoint of ``run_dir`` (ours, or an authors' results folder),
    oldest first, into ``eval.jsonl`` or ``--out``; under ``sup``, a stop signal ends it
    (status 130) without a line for the checkpoint it cut short."""
    if not run_dir.is_dir():
        raise UsageError("--run %s: no such run directory" % run_dir)
    found = run_checkpoints(run_dir)
    if not found:
        raise UsageError("--run %s: no complete checkpoint in %s; train first or pass "
                         "another run" % (run_dir, checkpoints_dir(run_dir)))
    output = eval_output(run_dir, getattr(args, "out", None))
    infos = [describe_checkpoint(path, args) for _step, path in found]
    check_fits(infos[-1], "--run")
    for info in infos:  # a high level's RRT figures: beside the JSON lines
        if info["task"] == UPPER:
            info["figures"] = rrt_figures(output.parent, info)
    records = []  # type: List[Dict[str, Any]]
    failed = 0
    bar = tqdm(total=len(found), file=sys.stderr, unit="checkpoint", dynamic_ncols=True)

    def shown(done: int, total: int, *step: int) -> None:  # within a checkpoint (#81)
        bar.set_postfix_str("%d/%d envs done, step %s" % (done, total, "/".join(map(str, step))))

    try:
        for info in infos:
            path = Path(info["checkpoint"])
            bar.set_description(path.name)
            code, result, last = evaluate(info, args, sup=sup, on_progress=shown)
            if sup.stopping:
                return 130
            if result is None:
                failed += 1
                result = {"checkpoint": str(path), "step": info["step"],
                          "error": last or "exit status %d" % code}
                bar.write("%s: %s" % (path.name, result["error"]))
            records.append(result)
            print(json.dumps(result, sort_keys=True), flush=True)
            # as it goes, atomically: a stop or a full disk loses at most the checkpoint
            # under way, and until the first is done the previous file stays as it was
            write_text(output, "".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
            bar.update(1)
    finally:
        bar.close()
    print("mapush eval: %d checkpoint(s) -> %s" % (len(records), output), file=sys.stderr)
    if failed:
        print("error: %d of %d checkpoints could not be evaluated; their lines in %s say why"
              % (failed, len(records), output), file=sys.stderr)
        return 1
    return 0


def main(args: argparse.Namespace) -> int:
    with Supervisor("mapush eval", "the evaluation stops; what it wrote holds only the "
                    "checkpoints done") as sup:
        code = _main(args, sup)
    return 130 if sup.stopping else code


def _main(args: argparse.Namespace, sup: Supervisor) -> int:
    schema.environ()  # MAPUSH_RRT_FIGURES reaches MQE's planner (patches/mapush/04)
    video = getattr(args, "video", False)
    if getattr(args, "num_envs", None) is None:
        args.num_envs = 1 if video else CALCULATOR_NUM_ENVS
    require_devices(args.sim_device, args.rl_device)
    if getattr(args, "run", None):
        if video:
            raise UsageError("--video records one checkpoint: use --checkpoint, not --run")
        return evaluate_run(Path(args.run), args, sup)
    info = describe_request(args.checkpoint, args)
    out = getattr(args, "out", None)
    parent = Path(info["checkpoint"]).parent  # --out DIR, else RUN/videos of its run
    run = parent.parent if parent.name == "checkpoints" else parent
    if video:
        found = problems(in_container())  # MQE's camera must render, checked before a simulation
        if found:
            raise UsageError("--video: cannot render: %s; %s (mapush doctor --video checks)"
                             % found[0])
        folder = Path(out) if out else run / VIDEO_DIR
        refuse_inside_run("--out", folder, run)
        if not writable(folder):
            raise UsageError("--video: %s is not writable (a read-only run such as the "
                             "image's /opt/mapush): pass --out DIR" % folder)
        info = dict(info, video={"folder": str(folder.resolve()), "episodes": int(args.episodes)})
        if info["task"] == UPPER:
            info["figures"] = rrt_figures(folder, info)
    elif info["task"] == UPPER:
        if out:
            refuse_inside_run("--out", Path(out), run)  # the RRT figures: never into another run
            if not writable(Path(out)):
                raise UsageError("--out %s: not a writable folder for the RRT figures" % out)
            info["figures"] = str(Path(out).resolve())
        else:
            print("mapush eval: the RRT figures are not kept; pass --out DIR to keep those of "
                  "the first %s envs" % os.environ.get("MAPUSH_RRT_FIGURES", "8"),
                  file=sys.stderr)
    code, result, last = evaluate(info, args, echo=True, sup=sup)
    if code < 0 and not sup.stopping:
        raise MapushError("evaluating %s: %s" % (info["checkpoint"], last[len("error: "):]))
    if result is None:
        return code or 1  # the child printed its own error line
    print(json.dumps(result, sort_keys=True))
    return 0
