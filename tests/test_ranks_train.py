"""One run across ranks (#78): ``mapush train --ranks 2`` on the CPU over gloo, through
torchrun, on the MQE double: the ranks take the same steps (rank 0's weights broadcast,
patches/openrl/05 pooling the batch), --steps counts every rank's env steps, rank 0 alone
writes the run, SIGTERM stops every rank after the same update with a final checkpoint,
SIGKILL of a rank ends the others, and --resume keeps the world size."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mapush.checkpoints.store import latest_checkpoint, list_checkpoints
from tests.conftest import double_env, one_error, run_mapush

CONFIGS = {"ppo": "episode_length: 20\nlog_interval: 1\nppo_epoch: 1\n",
           "happo": "train:\n  episode_length: 20\nalgo:\n  ppo_epoch: 1\n  critic_epoch: 1\n",
           "mappo": "train:\n  episode_length: 20\nalgo:\n  ppo_epoch: 1\n  critic_epoch: 1\n"}
ENVS = 4
PER_UPDATE = 2 * ENVS * 20  # two ranks' env steps in one update
CPU = ["--sim-device", "cpu", "--rl-device", "cpu"]


def common(tmp_path, *extra, algo="ppo"):
    config = tmp_path / "small.yaml"
    config.write_text(CONFIGS[algo])
    return ["train", "--algo", algo, "--num-envs", ENVS, "--config", config,
            "--ranks", 2] + CPU + list(extra)


@pytest.mark.parametrize("algo", sorted(CONFIGS))
def test_two_ranks_train_one_run_that_rank_0_alone_writes(upstream, tmp_path, algo):
    run = tmp_path / "run"
    scratch = tmp_path / "tmp"  # where rank 1's folder goes, and must be gone from
    scratch.mkdir()
    proc = run_mapush(common(tmp_path, "--steps", 3 * PER_UPDATE, "--checkpoint-interval",
                             PER_UPDATE, "--run-dir", run, algo=algo),
                      double_env(upstream, TMPDIR=scratch), cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    steps = [step for step, _path, _meta in list_checkpoints(run)]
    assert steps == [PER_UPDATE, 2 * PER_UPDATE, 3 * PER_UPDATE], steps  # both ranks' steps
    meta = list_checkpoints(run)[-1][2]
    assert meta["ranks"] == 2 and meta["update"] == 3
    assert meta.get("num_envs", meta.get("n_rollout_threads")) == ENVS
    record = json.loads((run / "config.json").read_text())
    assert record["spec"]["ranks"] == 2
    # one writer: one event file, one checkpoint folder a step, rank 1's scratch gone
    assert len(list((run / "logs").glob("events.out.tfevents*"))) == 1
    assert not list(scratch.glob("mapush-rank1-*"))
    assert "mapush.run.child" not in proc.stderr and "/tmp/mapush-rank1-" not in proc.stderr
    assert proc.stderr.count("mapush: training finished at step %d" % (3 * PER_UPDATE)) == 1


@pytest.mark.parametrize("algo, component, patch", [("ppo", "openrl", "05-"),
                                                     ("happo", "harl", "06-")])
def test_ranks_whose_updates_are_not_pooled_are_caught(upstream, tmp_path, algo, component,
                                                       patch):
    """The control: OpenRL without patches/openrl/05 (HARL without harl/06) trains each rank
    on its own batch, so their weights drift apart; the run's end check says so."""
    from tests.upstream import site_without

    site = site_without(tmp_path / "site", patch, component=component)
    run = tmp_path / "run"
    proc = run_mapush(common(tmp_path, "--steps", 2 * PER_UPDATE, "--run-dir", run, algo=algo),
                      double_env(dict(upstream, site=site)), cwd=tmp_path, timeout=600)
    assert proc.returncode != 0
    assert "the ranks' weights drifted apart" in proc.stderr, proc.stderr[-3000:]


@pytest.mark.parametrize("algo", ["ppo", "happo"])
def test_sigterm_stops_both_ranks_after_one_update_and_resume_keeps_the_world(upstream,
                                                                             tmp_path, algo):
    run = tmp_path / "run"
    env = double_env(upstream, MQE_DOUBLE_STEP_SLEEP="0.01")
    argv = [sys.executable, "-m", "mapush"] + [str(a) for a in common(
        tmp_path, "--steps", 40 * PER_UPDATE, "--checkpoint-interval", 100 * PER_UPDATE,
        "--run-dir", run, algo=algo)]
    proc = subprocess.Popen(argv, env=env, cwd=str(tmp_path), stderr=subprocess.PIPE,
                            universal_newlines=True, start_new_session=True)
    try:
        deadline = time.time() + 300
        progress = run / "progress.txt"
        while time.time() < deadline and proc.poll() is None:
            if progress.is_file() and len(progress.read_text().splitlines()) >= 2:
                break
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()[1][-4000:]
        os.killpg(proc.pid, signal.SIGTERM)  # as a scheduler stops a job: every process
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, err[-4000:]
    (step, _path, meta), = list_checkpoints(run)
    assert 2 * PER_UPDATE <= step < 40 * PER_UPDATE and step % PER_UPDATE == 0, step
    assert "stopped by SIGTERM" in err
    # --resume keeps the world size: another is one line, nothing changed
    before = (run / "config.json").read_bytes()
    refused = run_mapush(["train", "--resume", run, "--ranks", 3] + CPU, env, cwd=tmp_path)
    assert "trained across 2 rank(s)" in one_error(refused)
    assert (run / "config.json").read_bytes() == before
    again = run_mapush(["train", "--resume", run, "--steps", step + PER_UPDATE], env,
                       cwd=tmp_path, timeout=600)
    assert again.returncode == 0, again.stderr[-4000:]
    assert latest_checkpoint(run)[0] == step + PER_UPDATE


def test_sigkill_of_one_rank_ends_the_others_within_seconds(upstream, tmp_path):
    run = tmp_path / "run"
    env = double_env(upstream, MQE_DOUBLE_STEP_SLEEP="0.01")
    argv = [sys.executable, "-m", "mapush"] + [str(a) for a in common(
        tmp_path, "--steps", 40 * PER_UPDATE, "--run-dir", run)]
    proc = subprocess.Popen(argv, env=env, cwd=str(tmp_path), stderr=subprocess.PIPE,
                            universal_newlines=True, start_new_session=True)
    try:
        deadline = time.time() + 300
        while time.time() < deadline and proc.poll() is None:
            if (run / "progress.txt").is_file():
                break
            time.sleep(0.2)
        ranks = processes(run, "mapush.run.child")
        assert len(ranks) == 2, ranks
        os.kill(ranks[-1], signal.SIGKILL)
        killed = time.time()
        _out, err = proc.communicate(timeout=120)
        took = time.time() - killed
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode != 0
    assert took < 60, "the other rank ran on for %.0f s" % took  # a hang guard (#80)
    assert processes(run, "") == []  # torchrun and both ranks gone


def processes(run, word):
    """The pids whose command line names ``run`` and ``word`` (the ranks: not torchrun)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(run) in text and word in text and ("torch.distributed.run" not in text or
                                                  not word):
            found.append(int(cmdline.parent.name))
    return found


@pytest.mark.parametrize("extra, says", [
    (["--ranks", 2], "--ranks 2 on cuda:0: --ranks runs on the CPU"),
    (["--gpus", "0,1", "--sim-device", "cpu"], "--gpus runs on the GPUs"),
    (["--gpus", "0,1", "--ranks", 3], "--gpus gives one rank a GPU"),
    (["--gpus", "0,0"], "--gpus: '0,0' names a value twice"),
    (["--gpus", "0,1", "--sim-device", "cuda:1"], "each rank sees its own GPU only"),
    (["--ranks", 2, "--algo", "hatrpo"] + CPU, "only ppo, happo, mappo train across ranks"),
])
def test_bad_rank_options_are_one_line_before_anything(tmp_path, extra, says):
    run = tmp_path / "run"
    proc = run_mapush(["train", "--run-dir", run, "--no-preflight"] + extra, double_env(),
                      cwd=tmp_path)
    assert says in one_error(proc)
    assert not run.exists()


def test_sigkill_of_the_parent_ends_torchrun_and_the_ranks_within_seconds(upstream, tmp_path):
    run = tmp_path / "run"
    env = double_env(upstream, MQE_DOUBLE_STEP_SLEEP="0.01")
    argv = [sys.executable, "-m", "mapush"] + [str(a) for a in common(
        tmp_path, "--steps", 40 * PER_UPDATE, "--run-dir", run)]
    proc = subprocess.Popen(argv, env=env, cwd=str(tmp_path), stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 300
        while time.time() < deadline and len(processes(run, "mapush.run.child")) < 2:
            time.sleep(0.2)
        assert len(processes(run, "mapush.run.child")) == 2
        proc.kill()
        proc.wait()
        killed = time.time()
        while processes(run, "") and time.time() < killed + 60:  # a hang guard (#80)
            time.sleep(0.2)
        assert processes(run, "") == [], "torchrun or a rank outlived the parent"
    finally:
        for pid in processes(run, ""):
            os.kill(pid, signal.SIGKILL)


def _pooling_rank(rank, store, out):
    import torch
    import torch.distributed as dist

    os.environ.update(WORLD_SIZE="2", RANK=str(rank))
    dist.init_process_group("gloo", init_method="file://%s" % store, world_size=2, rank=rank)
    from mapush.envs.stats import EpisodeStats, drain_reward_terms

    class Env(object):  # rank 0's two episodes succeed, rank 1's fail
        finished_buf = torch.full((2,), 1.0 - rank)
        num_envs = 2
        reward_buffer = {"push_reward": 2.0 * (rank + 1), "step_count": 1}

    stats = EpisodeStats(2, "cpu", window=10)
    stats.update(Env(), torch.ones(2))
    Path(out, "rank%d.json" % rank).write_text(json.dumps(
        [stats.summary(), drain_reward_terms(Env())]))


def test_episode_statistics_are_pooled_over_the_ranks(tmp_path):
    """The logged success rate and reward terms are every rank's, not rank 0's alone: 2 of
    4 episodes succeeded (rank 0 alone: 2 of 2); push reward (1 + 2) / 2 a step."""
    import torch.multiprocessing as mp

    mp.spawn(_pooling_rank, args=(str(tmp_path / "store"), str(tmp_path)), nprocs=2)
    for rank in (0, 1):
        summary, terms = json.loads((tmp_path / ("rank%d.json" % rank)).read_text())
        assert summary["success_rate"] == 0.5, summary
        assert terms["push_reward"] == 1.5, terms
