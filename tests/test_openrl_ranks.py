"""patches/openrl/05 (PPO across the ranks of one run) on the real OpenRL 0.2.0 files, two
processes over gloo on the CPU (``benchmarks/openrl_ranks.py`` runs them; with
``--device cuda`` it runs the same on NCCL).

One PPO update (3 epochs of one minibatch, the value normaliser on) over a rollout of 8 envs
x 2 agents x 6 steps of seeded random rows, run three ways: one process over all 8 envs,
and two ranks of one group over 4 envs each (rank r the envs 4r..4r+3, the rows the single
process holds). With 05, both ranks end with the same weights, bit for bit, and those are
the single process's to float32 rounding: ``ATOL`` (measured at most 1.2e-7 here: the
ranks' sums are added in another order). Without 05 the ranks drift apart and miss the
single process's weights by about 3e-3, which the last test asserts, so the data reach each
of 05's sums. Mutations tried by hand, each failing a test here: the gradient summed but
not divided by the ranks; the advantages' moments left rank-local; the value normaliser's
batch moments left rank-local. With one process, 05 changes nothing: the weights equal
OpenRL's without 05, bit for bit, in a group of one and without a group.
"""
import socket

import pytest

from benchmarks import openrl_ranks
from benchmarks.openrl_ranks import launch, options

ATOL = 1e-6
ENVS = 8  # the rollout's envs, split among the ranks

pytestmark = pytest.mark.usefixtures("one_thread_each")  # (conftest)


def weights(site, world, group=True, tensors=False):
    """Each rank's weights after the update, ``world`` processes with ``site``'s OpenRL
    (``benchmarks/openrl_ranks.py``: the rows, the update, the launch)."""
    outs = launch(options(site=site, ranks=world, envs_per_rank=ENVS // world, steps=6,
                          epochs=3, minibatches=1, no_group=not group, tensors=int(tensors),
                          weights=True))
    assert len(outs[0]["weights"]) > 10  # every model's tensors, the normaliser's included
    return [out["weights"] for out in outs]


def farthest(one, other):
    return max(max(abs(a - b) for a, b in zip(one[key], other[key])) for key in one)


@pytest.fixture(scope="module")
def without_05(tmp_path_factory):
    """OpenRL patched as shipped but for 05."""
    from tests.upstream import site_without

    return site_without(tmp_path_factory.mktemp("without-05"), "05-", component="openrl")


@pytest.mark.parametrize("tensors", [False, True], ids=["numpy-buffer", "tensor-buffer"])
def test_two_ranks_on_half_the_envs_take_the_step_one_process_takes_on_all(upstream, tensors):
    [single] = weights(upstream["site"], 1, group=False, tensors=tensors)
    first, second = weights(upstream["site"], 2, tensors=tensors)
    assert first == second  # every rank the same weights and statistics, bit for bit
    assert farthest(first, single) <= ATOL
    assert any(v != 0.0 for v in first["critic.value_normalizer.running_mean"])


def test_one_process_is_openrls_own_update_bit_for_bit(upstream, without_05):
    [theirs] = weights(without_05, 1, group=False)
    assert weights(upstream["site"], 1, group=False) == [theirs]
    assert weights(upstream["site"], 1, group=True) == [theirs]  # a group of one


def test_without_05_the_ranks_drift_apart(upstream, without_05):
    [single] = weights(upstream["site"], 1, group=False)
    first, second = weights(without_05, 2)
    assert first != second
    assert farthest(first, single) > 100 * ATOL


def test_a_rendezvous_port_taken_before_rank_0_listens_is_tried_again(upstream, monkeypatch):
    """The launcher's free port can be taken between its pick and rank 0's listen (seen on
    the x4 machine): the ranks start again on another, instead of failing the run."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        picks = iter([held.getsockname()[1]])  # the first pick: a port in use
        real = openrl_ranks.free_port
        monkeypatch.setattr(openrl_ranks, "free_port", lambda: next(picks, None) or real())
        outs = launch(options(site=upstream["site"], ranks=2, envs_per_rank=2, steps=3,
                              epochs=1, minibatches=1))
    assert [out["rank"] for out in outs] == [0, 1]
    assert next(picks, None) is None  # the taken port was tried first


SILENT_WORKER = """import json, os
if os.environ["MASTER_PORT"] == os.environ["HELD_PORT"] and os.environ["RANK"] == "0":
    os.abort()  # as rank 0 did on torch 1.13 in CI: SIGABRT, nothing said of the port
print(json.dumps({"rank": int(os.environ["RANK"]), "port": os.environ["MASTER_PORT"]}))
"""


def test_a_rank_0_that_aborts_without_a_word_on_a_taken_port_starts_again(tmp_path,
                                                                           monkeypatch):
    """Rank 0 may abort without saying EADDRINUSE (seen in CI on the 3.8 stack): the launcher
    then asks the port whether another process listens on it, and all ranks start again on
    another. A rank that fails on a free port is an error, not a retry."""
    script = tmp_path / "worker.py"
    script.write_text(SILENT_WORKER)
    args = options(site=tmp_path, ranks=2, timeout=60)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        assert openrl_ranks.port_taken(port)
        monkeypatch.setenv("HELD_PORT", str(port))
        picks = iter([port])
        real = openrl_ranks.free_port
        monkeypatch.setattr(openrl_ranks, "free_port", lambda: next(picks, None) or real())
        outs = openrl_ranks.launch_workers(str(script), args)
        assert [out["rank"] for out in outs] == [0, 1] and outs[0]["port"] != str(port)
    assert not openrl_ranks.port_taken(port)
    monkeypatch.setattr(openrl_ranks, "free_port", lambda: port)  # free now: rank 0 aborts
    with pytest.raises(RuntimeError, match="rank 0 exited -6") as failed:
        openrl_ranks.launch_workers(str(script), args)
    assert not isinstance(failed.value, openrl_ranks.PortTaken)
