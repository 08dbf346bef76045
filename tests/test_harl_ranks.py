"""patches/harl/06 (HAPPO and MAPPO across the ranks of one run) on HARL's real files, two
processes over gloo on the CPU (``benchmarks/harl_ranks.py`` runs them; with ``--device
cuda`` it runs the same on NCCL).

One update of HARL's own runner (``OnPolicyHARunner.train`` for HAPPO,
``OnPolicyMARunner.train`` for MAPPO: 2 epochs of one minibatch per actor and for the critic,
EP state, the value normaliser on) over a rollout of 8 envs x 3 agents x 6 steps of seeded
random rows, run two ways: one process over all 8 envs, and two ranks of one group over 4
envs each (rank r the envs 4r..4r+3, the rows the single process holds). Every process
builds the same initial weights, then draws from its own seed (100 + rank), as ranks of a run
do (seed + rank): HAPPO's random order of the agents differs between the ranks' own draws.

With 06, both ranks end with the same weights, bit for bit, and those are the single
process's to float32 rounding: ``ATOL`` (the ranks' sums are added in another order). Without
06 the ranks drift apart, which the last test asserts, so the data reach each of 06's sums.
Mutations tried by hand, each failing a test here: the gradient summed but not divided by
the ranks; the critic's gradient left rank-local; the advantages' moments left rank-local;
the value normaliser's batch moments left rank-local; HAPPO's order left to each rank's draw.
With one process, 06 changes nothing: the weights equal HARL's without 06, bit for bit, in a
group of one and without a group.
"""
import pytest

from benchmarks.harl_ranks import launch, options

ATOL = 1e-6
ENVS = 8  # the rollout's envs, split among the ranks

pytestmark = pytest.mark.usefixtures("one_thread_each")  # (conftest)


def ranks(site, world, algo, group=True, device_rollout=True):
    """Each rank's output (its agent order and weights) after the update, ``world``
    processes with ``site``'s HARL."""
    outs = launch(options(site=site, algo=algo, ranks=world, envs_per_rank=ENVS // world,
                          no_group=not group, device_rollout=int(device_rollout),
                          weights=True))
    assert len(outs[0]["weights"]) > 10  # every actor's, the critic's and the normaliser's
    return outs


def farthest(one, other):
    return max(max(abs(a - b) for a, b in zip(one[key], other[key])) for key in one)


@pytest.fixture(scope="module")
def without_06(tmp_path_factory):
    """HARL patched as shipped but for 06."""
    from tests.upstream import site_without

    return site_without(tmp_path_factory.mktemp("without-06"), "06-")


@pytest.mark.parametrize("algo,device_rollout", [("happo", True), ("happo", False),
                                                 ("mappo", True)],
                         ids=["happo-tensors", "happo-numpy", "mappo-tensors"])
def test_two_ranks_on_half_the_envs_take_the_step_one_process_takes_on_all(
        upstream, algo, device_rollout):
    [single] = ranks(upstream["site"], 1, algo, group=False, device_rollout=device_rollout)
    first, second = ranks(upstream["site"], 2, algo, device_rollout=device_rollout)
    assert first["weights"] == second["weights"]  # every rank the same, bit for bit
    assert farthest(first["weights"], single["weights"]) <= ATOL
    assert first["order"] == second["order"] == single["order"]
    assert any(v != 0.0 for v in first["weights"]["value_normalizer.running_mean"])


@pytest.mark.parametrize("algo", ["happo", "mappo"])
def test_one_process_is_harls_own_update_bit_for_bit(upstream, without_06, algo):
    [theirs] = ranks(without_06, 1, algo, group=False)
    assert ranks(upstream["site"], 1, algo, group=False)[0]["weights"] == theirs["weights"]
    assert ranks(upstream["site"], 1, algo, group=True)[0]["weights"] == theirs["weights"]


def test_without_06_the_ranks_drift_apart_and_update_the_agents_in_their_own_orders(
        upstream, without_06):
    [single] = ranks(upstream["site"], 1, "happo", group=False)
    first, second = ranks(without_06, 2, "happo")
    assert first["order"] != second["order"]  # each rank's own draw (seed + rank)
    assert first["weights"] != second["weights"]
    assert farthest(first["weights"], single["weights"]) > 100 * ATOL
