"""The evaluation child: ``python -m mapush.eval.calculator EVAL_SPEC_JSON``."""
import json
import math
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, List

from tqdm import tqdm

from mapush.errors import MapushError
from mapush.eval import PROGRESS  # (this child's parent package: not the other way round)
from mapush.common.leave import leave
from mapush.proc import stop_signals
from mapush.spec import UPPER, EvalSpec, RunSpec

PROGRESS_EVERY = 10


def calculator(env: Any, policy: Callable[[Any], Any], max_steps: int,
               progress: bool = False) -> Dict[str, Any]:
    """Step ``env`` with ``policy(obs_numpy) -> action tensor`` until every env has ended
    its first episode; the paper's metrics from MQE's first-episode buffers. With
    ``progress``, the envs done so far and the step go to stderr every few steps."""
    import torch

    obs = env.reset()
    steps = 0
    with torch.no_grad():
        while not bool(env.init_reset_buf.all()):
            if progress and steps % PROGRESS_EVERY == 0:
                print("%s %d %d %d %d" % (PROGRESS, int(env.init_reset_buf.sum()), env.num_envs,
                                          steps, max_steps), file=sys.stderr, flush=True)
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
            bar[0] = tqdm(total=steps, desc="episode %d/%d" % (episode, episodes),
                          unit="frame", file=sys.stderr, dynamic_ncols=True)
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


ROLLOUT_STEPS = 50


def evaluate_checkpoint(request: EvalSpec) -> Dict[str, Any]:
    """Build the checkpoint's env, load its policy, run the calculator."""
    from mapush import sim, registry

    figures = request.figures
    sim.headless_figures(Path(figures) if figures else None)
    sim.import_isaacgym()  # before torch
    checkpoint = Path(request.checkpoint)
    spec = RunSpec(algo=request.algo, task=request.task, object=request.object,
                   num_envs=request.num_envs, steps=1, seed=request.seed, run_dir=request.scratch,
                   sim_device=request.sim_device, rl_device=request.rl_device,
                   config=request.config, object_config=request.object_config,
                   command_net=request.command_net, task_sets=request.task_sets)
    video = request.video
    if video:
        spec = spec.with_changes(record_video=True)
    env, _cfg = sim.make_env(spec)
    policy = registry.load(spec.algo).load_policy(checkpoint, env, spec)
    if spec.task == UPPER:
        # As upstream evaluates the hierarchy: its test.py plans with RRT on its 4th reset,
        # the one right before the calculator (test.py:107,113,132-133; ppo_net.py:67,
        # rl_agent.py:183), by the switch of patches/mapush/04. Training never plans.
        env.rrt_planning = True
    if request.observations:  # what the policy sees in a short rollout (mapush export)
        import numpy as np
        import torch

        torch.set_grad_enabled(False)  # this child only evaluates
        obs, seen = env.reset(), []  # type: Any, List[Any]
        for _ in range(ROLLOUT_STEPS):
            seen.append(obs.detach().cpu().numpy())
            obs = env.step(policy(seen[-1]))[0]
        np.save(request.observations, np.stack(seen))
        metrics = {"observations": request.observations, "steps": ROLLOUT_STEPS}
    elif video:
        metrics = record(env, policy, Path(video["folder"]), checkpoint.name,
                         int(video["episodes"]))
    else:
        max_steps = 2 * int(env.max_episode_length) + 10
        metrics = calculator(env, policy, max_steps, progress=request.progress)
    result = {"checkpoint": str(checkpoint), "step": request.step, "algo": spec.algo,
              "task": spec.task, "object": spec.object, "origin": request.origin,
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
        with stop_signals(signal.default_int_handler):  # a stop: KeyboardInterrupt, below
            if len(argv) != 1:
                raise MapushError("usage: python -m mapush.eval.calculator EVAL_SPEC_JSON")
            spec = EvalSpec.from_dict(json.loads(Path(argv[0]).read_text()))
            result = evaluate_checkpoint(spec)
            os.write(result_fd, (json.dumps(result, sort_keys=True) + "\n").encode())
    except KeyboardInterrupt:  # the parent says it stopped
        code = 130
    except MapushError as exc:
        print("error: %s" % exc, file=sys.stderr)
        code = exc.exit_code
    except BaseException as exc:  # noqa: BLE001 - the last line must be the diagnosis
        traceback.print_exc()
        print("error: evaluation failed: %s: %s"
              % (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else ""),
              file=sys.stderr)
        code = 1
    leave(code)


if __name__ == "__main__":
    child_main(sys.argv[1:])
