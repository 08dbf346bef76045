"""``mapush eval``: the paper's metrics of a checkpoint, by MAPush's calculator mode.

Every env runs until it has finished its first episode (MQE's ``init_reset_buf``); then
success rate = mean(``init_finished_buf``), finished time = mean(``init_episode_length_buf``
x ``dt``), collision / collaboration degree = mean over the successful envs of the counter
over the episode length. ``--checkpoint PATH`` prints one JSON object on stdout (logs go to
stderr); ``--run DIR`` evaluates every checkpoint of a run into ``DIR/eval.jsonl`` (one JSON
line per checkpoint, rewritten atomically after each) with a progress bar on stderr.

Each checkpoint is evaluated in a fresh child process (``python -m mapush.evaluate``): Isaac
Gym must be imported before torch, the calculator's first-episode buffers exist once per
simulation, a crash in PhysX is reported instead of killing the command, and the child
leaves with ``os._exit`` (Isaac Gym can segfault in interpreter teardown).
"""
import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from mapush.errors import MapushError, UsageError
from mapush.run.atomic import writable, write_text
from mapush.run.leave import leave
from mapush.checkpoint_source import describe, resolve, run_checkpoints
from mapush.run.checkpoints import checkpoints_dir
from mapush.spec import UPPER, UPPER_OBS_DIM, RunSpec

EVAL_FILE = "eval.jsonl"
VIDEO_DIR = "videos"
DEFAULT_NUM_ENVS = 300  # MAPush's calculator (task/<object>/train.sh)
# The paper's four (openrl_ws/test.py:136-146), then the obstacle collision degree of
# patches/mapush/05 (upstream's collision degree counts the final target and one obstacle in
# the high level: docs/upstream.md).
METRICS = ("success_rate", "finished_time", "collision_degree", "collaboration_degree",
           "obstacle_collision_degree")


# -- parent side: which checkpoint, which run -------------------------------------------
def check_fits(info: Dict[str, Any], what: str = "--checkpoint") -> None:
    """The checkpoint's input dim against the obs dim of the env it would run in, before a
    simulation starts: a mismatch names both dims and the objects that would fit."""
    from mapush.objects import ConfigReadError, object_config_path, objects_with_obs_dim, \
        read_object_facts
    from mapush.policy_file import input_dim

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
    from mapush.spec import UPPER_OBJECT, check_upper_object

    task = getattr(args, "task", None)
    obj = getattr(args, "object", None)
    config = getattr(args, "object_config", None)
    config = str(Path(config).resolve()) if config else None
    if obj is not None and config is None:
        from mapush.objects import check_object_name

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
        from mapush.cli import resolve_command_net

        info["command_net"] = resolve_command_net(command_net)
    elif not Path(info["command_net"]).is_file():
        raise UsageError("%s drove the mid-level policy %s, which is gone: pass --command-net "
                         "PATH" % (checkpoint, info["command_net"]))
    return info


def child_command(info: Dict[str, Any], args: argparse.Namespace) -> List[str]:
    request = dict(info, num_envs=args.num_envs, sim_device=args.sim_device,
                   rl_device=args.rl_device, seed=args.seed)
    return [sys.executable, "-m", "mapush.evaluate", json.dumps(request, sort_keys=True)]


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return "signal %d" % signum


def evaluate_in_child(info: Dict[str, Any], args: argparse.Namespace,
                      capture_stderr: bool) -> Tuple[int, Optional[Dict[str, Any]], str]:
    """Run one evaluation child: ``(exit status, result or None, last stderr line)``."""
    proc = subprocess.run(child_command(info, args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE if capture_stderr else None,
                          universal_newlines=True)
    last = ""
    if capture_stderr:
        lines = [line for line in (proc.stderr or "").splitlines() if line.strip()]
        last = lines[-1] if lines else ""
    if proc.returncode < 0:
        last = "error: the evaluation process died from %s" % _signal_name(-proc.returncode)
    result = None
    if proc.returncode == 0:
        out = [line for line in proc.stdout.splitlines() if line.strip()]
        try:
            result = json.loads(out[-1]) if out else None
        except ValueError:
            result = None
        if result is None:
            return 1, None, "error: the evaluation process printed no result"
    return proc.returncode, result, last


def eval_output(run_dir: Path, out: Optional[str]) -> Path:
    """``--out FILE``, else ``DIR/eval.jsonl``, which must be writable (the image's
    /opt/mapush is not)."""
    if out:
        path = Path(out)
        if not path.parent.is_dir() or not os.access(str(path.parent), os.W_OK):
            raise UsageError("--out %s: its folder %s does not exist or is not writable"
                             % (out, path.parent))
        return path
    if not os.access(str(run_dir), os.W_OK):
        raise UsageError("--run %s is read-only: pass --out FILE (e.g. --out runs/%s-eval.jsonl)"
                         % (run_dir, run_dir.name))
    return run_dir / EVAL_FILE


def rrt_figures(folder: Path, info: Dict[str, Any]) -> str:
    """Where a high-level checkpoint's RRT figures go under ``folder``:
    ``rrt/<checkpoint>/``."""
    return str(Path(folder).resolve() / "rrt" / Path(info["checkpoint"]).name)


def evaluate_streaming(info: Dict[str, Any], args: argparse.Namespace,
                       on_progress: Callable[[int, int], None]
                       ) -> Tuple[int, Optional[Dict[str, Any]], str]:
    """Like :func:`evaluate_in_child`, with the child's progress (envs whose first episode
    ended) reported to ``on_progress(done, total)`` as it runs."""
    proc = subprocess.Popen(child_command(dict(info, progress=True), args),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            universal_newlines=True)
    last = ""
    assert proc.stderr is not None and proc.stdout is not None
    for line in proc.stderr:
        if line.startswith(PROGRESS):
            _tag, done, total = line.split()
            on_progress(int(done), int(total))
        elif line.strip():
            last = line.strip()
    out = proc.stdout.read()
    code = proc.wait()
    if code < 0:
        return code, None, "error: the evaluation process died from %s" % _signal_name(-code)
    if code != 0:
        return code, None, last
    lines = [line for line in out.splitlines() if line.strip()]
    try:
        return 0, json.loads(lines[-1]), last
    except (IndexError, ValueError):
        return 1, None, "error: the evaluation process printed no result"


def evaluate_run(run_dir: Path, args: argparse.Namespace) -> int:
    """Every complete checkpoint of ``run_dir`` (ours, or an authors' results folder),
    oldest first, into ``eval.jsonl`` or ``--out``."""
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
    bar = _progress(len(found))
    try:
        for info in infos:
            path = Path(info["checkpoint"])
            bar.set_description(path.name)
            code, result, last = evaluate_in_child(info, args, capture_stderr=True)
            if result is None:
                failed += 1
                result = {"checkpoint": str(path), "step": info["step"],
                          "error": last or "exit status %d" % code}
                bar.write("%s: %s" % (path.name, result["error"]))
            records.append(result)
            write_text(output, "".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
            bar.update(1)
    finally:
        bar.close()
    for record in records:
        print(json.dumps(record, sort_keys=True))
    print("mapush eval: %d checkpoint(s) -> %s" % (len(records), output), file=sys.stderr)
    if failed:
        print("error: %d of %d checkpoints could not be evaluated; their lines in %s say why"
              % (failed, len(records), output), file=sys.stderr)
        return 1
    return 0


def _progress(total: int) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, file=sys.stderr, unit="checkpoint", dynamic_ncols=True)


def video_folder(info: Dict[str, Any], out: Optional[str]) -> Path:
    """``--out DIR``, else ``RUN/videos`` of the checkpoint's run; it must be writable."""
    if out:
        folder = Path(out)
    else:
        checkpoint = Path(info["checkpoint"])
        run = checkpoint.parent.parent if checkpoint.parent.name == "checkpoints" else \
            checkpoint.parent
        folder = run / VIDEO_DIR
    if not writable(folder):
        raise UsageError("--video: %s is not writable (a read-only run such as the image's "
                         "/opt/mapush): pass --out DIR" % folder)
    return folder


def check_rendering() -> None:
    """``--video`` needs MQE's camera to render: one line and the fix, before a simulation."""
    from mapush.diagnostics.doctor import in_container
    from mapush.diagnostics.rendering import problems

    found = problems(in_container())
    if found:
        what, fix = found[0]
        raise UsageError("--video: cannot render: %s; %s (mapush doctor --video checks)"
                         % (what, fix))


def main(args: argparse.Namespace) -> int:
    video = getattr(args, "video", False)
    if getattr(args, "num_envs", None) is None:
        args.num_envs = 1 if video else DEFAULT_NUM_ENVS
    if getattr(args, "run", None):
        if video:
            raise UsageError("--video records one checkpoint: use --checkpoint, not --run")
        return evaluate_run(Path(args.run), args)
    info = describe_request(args.checkpoint, args)
    if video:
        check_rendering()
        folder = video_folder(info, getattr(args, "out", None))
        info = dict(info, video={"folder": str(folder.resolve()),
                                 "episodes": int(args.episodes)})
        if info["task"] == UPPER:
            info["figures"] = rrt_figures(folder, info)
    elif info["task"] == UPPER:
        out = getattr(args, "out", None)
        if out:
            if not writable(Path(out)):
                raise UsageError("--out %s: not a writable folder for the RRT figures" % out)
            info["figures"] = str(Path(out).resolve())
        else:
            print("mapush eval: the RRT figures are not kept; pass --out DIR to keep those of "
                  "the first %s envs" % os.environ.get("MAPUSH_RRT_FIGURES", "8"),
                  file=sys.stderr)
    code, result, _last = evaluate_in_child(info, args, capture_stderr=False)
    if code < 0:
        raise MapushError("evaluating %s: the evaluation process died from %s"
                          % (info["checkpoint"], _signal_name(-code)))
    if result is None:
        return code or 1  # the child printed its own error line
    print(json.dumps(result, sort_keys=True))
    return 0


# -- child side: the calculator ---------------------------------------------------------
PROGRESS = "mapush-progress"  # stderr lines "mapush-progress DONE TOTAL" when asked
PROGRESS_EVERY = 10


def calculator(env: Any, policy: Callable[[Any], Any], max_steps: int,
               progress: bool = False) -> Dict[str, Any]:
    """Step ``env`` with ``policy(obs_numpy) -> action tensor`` until every env has ended
    its first episode; the paper's metrics from MQE's first-episode buffers. With
    ``progress``, the envs done so far go to stderr every few steps."""
    import torch

    obs = env.reset()
    steps = 0
    with torch.no_grad():
        while not bool(env.init_reset_buf.all()):
            if progress and steps % PROGRESS_EVERY == 0:
                print("%s %d %d" % (PROGRESS, int(env.init_reset_buf.sum()), env.num_envs),
                      file=sys.stderr, flush=True)
            if steps >= max_steps:
                raise MapushError("evaluation: %d of %d envs had not finished their first "
                                  "episode after %d steps"
                                  % (int((~env.init_reset_buf.bool()).sum()), env.num_envs,
                                     steps))
            obs, _reward, _done, _info = env.step(policy(obs.detach().cpu().numpy()))
            steps += 1
    finished = env.init_finished_buf.bool()
    length = env.init_episode_length_buf.double()
    result = {
        "success_rate": float(finished.double().mean()),
        "finished_time": float((length * float(env.dt)).mean()),
        "collision_degree": None, "collaboration_degree": None,
        "obstacle_collision_degree": None,
        "num_envs": int(env.num_envs), "eval_steps": steps,
    }  # type: Dict[str, Any]
    buffers = [("collision_degree", env.collision_degree_buf),
               ("collaboration_degree", env.collaboration_degree_buf)]
    if int(getattr(env, "num_obs", 0) or 0) > 0:  # obstacles (base_task.py:65)
        buf = getattr(env, "obstacle_collision_degree_buf", None)
        if buf is None:
            raise MapushError("the env has obstacles but no obstacle_collision_degree_buf: "
                              "MAPush is not patched (patches/mapush/05); rebuild the image")
        buffers.append(("obstacle_collision_degree", buf))
    if bool(finished.any()):
        for key, buf in buffers:
            value = float((buf[finished].double() / length[finished]).mean())
            result[key] = value if math.isfinite(value) else None
    return result


def record(env: Any, policy: Callable[[Any], Any], folder: Path, prefix: str,
           episodes: int) -> Dict[str, Any]:
    """Step ``env`` with ``policy`` until env 0 has ended ``episodes`` episodes, streaming
    MQE's camera frames into one MP4 per episode (:mod:`mapush.video`), a bar per episode
    on stderr."""
    import torch

    from mapush.video import EpisodeRecorder

    steps = int(env.max_episode_length) + 1
    bar = [None]  # type: List[Any]

    def on_frame(episode: int, frame: int) -> None:
        if bar[0] is None:
            bar[0] = _episode_bar(steps, "episode %d/%d" % (episode, episodes))
        bar[0].update(1)

    recorder = EpisodeRecorder(folder, prefix, episodes, 1.0 / float(env.dt), on_frame)
    videos = []  # type: List[Dict[str, Any]]
    env.start_recording()
    obs = env.reset()
    limit = episodes * (2 * steps + 10)
    try:
        with torch.no_grad():
            for _ in range(limit):
                obs, _reward, done, _info = env.step(policy(obs.detach().cpu().numpy()))
                if bool(done.reshape(-1)[0]):
                    success = bool(env.finished_buf.reshape(-1)[0])
                    frames = recorder.frames
                    path = recorder.end_episode(success)
                    if bar[0] is not None:
                        bar[0].close()
                        bar[0] = None
                    if path is not None:
                        videos.append({"episode": len(videos) + 1, "success": success,
                                       "file": str(path), "frames": frames})
                        print("mapush eval: episode %d: %s -> %s"
                              % (len(videos), "success" if success else "fail", path),
                              file=sys.stderr, flush=True)
                    if recorder.finished:
                        break
                recorder.drain(env)
    finally:
        recorder.abort()
        if bar[0] is not None:
            bar[0].close()
    if len(videos) < episodes:
        raise MapushError("--video: env 0 ended %d of %d episodes in %d steps"
                          % (len(videos), episodes, limit))
    return {"videos": videos, "num_envs": int(env.num_envs)}


def _episode_bar(total: int, desc: str) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="frame", file=sys.stderr, dynamic_ncols=True)


# The eval child's own folders for what the simulation writes (the PhysX budget): readers
# never write into the run they read (only eval.jsonl, videos/ and report/ are theirs).
_SCRATCH = []  # type: List[str]


def _scratch() -> str:
    _SCRATCH.append(tempfile.mkdtemp(prefix="mapush-eval-"))
    return _SCRATCH[-1]


def evaluate_checkpoint(request: Dict[str, Any]) -> Dict[str, Any]:
    """In the child: build the checkpoint's env, load its policy, run the calculator."""
    from mapush import sim
    from mapush.run.child import headless_figures

    figures = request.get("figures")
    headless_figures(Path(figures) if figures else None)
    sim.import_isaacgym()  # before torch
    checkpoint = Path(request["checkpoint"])
    spec = RunSpec(algo=request["algo"], task=request["task"], object=request["object"],
                   num_envs=int(request["num_envs"]), steps=1, seed=int(request["seed"]),
                   run_dir=_scratch(), sim_device=request["sim_device"],
                   rl_device=request["rl_device"], config=request.get("config"),
                   object_config=request.get("object_config"),
                   command_net=request.get("command_net"))
    video = request.get("video")
    if video:
        spec = spec.with_changes(record_video=True)
    env, _cfg = sim.make_env(spec)
    from mapush import trainers

    policy = trainers.load(spec.algo).load_policy(checkpoint, env, spec)
    if spec.task == UPPER:
        # As upstream evaluates the hierarchy: its test.py plans with RRT on its 4th reset,
        # the one right before the calculator (test.py:107,113,131-132; ppo_net.py:67,
        # rl_agent.py:183), by the switch of patches/mapush/04. Training never plans.
        env.rrt_planning = True
    if video:
        metrics = record(env, policy, Path(video["folder"]), checkpoint.name,
                         int(video["episodes"]))
    else:
        max_steps = 2 * int(env.max_episode_length) + 10
        metrics = calculator(env, policy, max_steps, progress=bool(request.get("progress")))
    result = {"checkpoint": str(checkpoint), "step": request.get("step"), "algo": spec.algo,
              "task": spec.task, "object": spec.object, "origin": request.get("origin"),
              "object_config": spec.object_config, "seed": spec.seed}
    result.update(metrics)
    stats = getattr(env, "rrt_stats", None) if spec.task == UPPER else None
    if stats:
        result["rrt"] = {"envs": stats["envs"], "planned": stats["planned"],
                         "failed": stats["failed"], "seconds": round(stats["seconds"], 3),
                         "figures": figures}
    return result


def child_main(argv: List[str]) -> None:
    # stdout carries the one JSON result: anything a library prints goes to stderr instead.
    result_fd = os.dup(1)
    os.dup2(2, 1)
    code = 0
    try:
        if len(argv) != 1:
            raise MapushError("usage: python -m mapush.evaluate REQUEST_JSON")
        result = evaluate_checkpoint(json.loads(argv[0]))
        os.write(result_fd, (json.dumps(result, sort_keys=True) + "\n").encode())
    except MapushError as exc:
        print("error: %s" % exc, file=sys.stderr)
        code = exc.exit_code
    except BaseException as exc:  # noqa: BLE001 - the last line must be the diagnosis
        traceback.print_exc()
        print("error: evaluation failed: %s: %s"
              % (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else ""),
              file=sys.stderr)
        code = 1
    import shutil

    for folder in _SCRATCH:
        shutil.rmtree(folder, ignore_errors=True)
    leave(code)


if __name__ == "__main__":
    child_main(sys.argv[1:])
