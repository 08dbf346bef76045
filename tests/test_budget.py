"""PhysX contact-buffer budget: sized from the envs and the free GPU memory."""
import json
import subprocess
import sys

import pytest

from mapush import physx_budget as pb
from mapush.errors import MapushError, UsageError
from mapush.objects import ObjectFacts, object_facts
from tests.conftest import DOUBLE_ROOT, double_env

GIB = 1024 ** 3
CUBOID = pb.TaskBodies.of(ObjectFacts(num_agents=2))


def is_pow2(n):
    return n > 0 and n & (n - 1) == 0


@pytest.fixture(autouse=True)
def no_override(monkeypatch):
    monkeypatch.delenv(pb.MULTIPLIER_ENV, raising=False)


def test_grows_with_num_envs_and_never_below_need():
    free = 80 * GIB
    sizes = [pb.choose_contact_pairs(n, free, CUBOID) for n in (1, 200, 2000, 8000, 16000)]
    pairs = [b.pairs for b in sizes]
    assert pairs == sorted(pairs) and pairs[-1] > pairs[1] > 0
    assert pairs[2] > pairs[1] and pairs[3] > pairs[2]
    for budget in sizes:
        assert is_pow2(budget.pairs)
        assert budget.pairs >= budget.needed * pb.MARGIN or budget.pairs == pb.MIN_CONTACT_PAIRS
        assert budget.bytes == budget.pairs * pb.BYTES_PER_CONTACT_PAIR
        assert budget.fits


@pytest.mark.parametrize("free_gib", [0.5, 2, 8, 24, 80])
@pytest.mark.parametrize("num_envs", [8, 200, 1000, 4096, 16000])
def test_never_exceeds_the_memory_it_may_use(free_gib, num_envs):
    free = int(free_gib * GIB)
    budget = pb.choose_contact_pairs(num_envs, free, CUBOID)
    assert budget.allowed_bytes == int(free * pb.CONTACT_SHARE)
    assert budget.pairs >= budget.needed  # never below what the envs need
    if budget.fits:
        assert budget.bytes <= budget.allowed_bytes
    else:  # even the minimum (needed, rounded up) is over the share: reported, not hidden
        assert budget.pairs == pb.next_pow2(budget.needed)
        assert budget.bytes > budget.allowed_bytes


def test_less_memory_shrinks_the_buffer_down_to_the_need():
    roomy = pb.choose_contact_pairs(4096, 80 * GIB, CUBOID)
    tight = pb.choose_contact_pairs(4096, 5 * GIB, CUBOID)
    assert tight.pairs < roomy.pairs
    assert tight.fits and tight.pairs >= tight.needed


def test_seed_000_eight_gb_two_hundred_envs_fits():
    free = 7757 * 1024 * 1024  # RTX 2070: 7757 MiB free before training (incident 000)
    budget = pb.choose_contact_pairs(200, free, CUBOID)
    assert budget.fits and budget.pairs >= budget.needed
    assert pb.run_memory_mb(200, budget) < 7757
    # ...while upstream's 2**23 * 5 is what did not fit there, and 2**23 did (incident 000).
    upstream = pb.override_budget(200, pb.UPSTREAM_MULTIPLIER, CUBOID)
    assert pb.run_memory_mb(200, upstream) > 7757
    assert pb.run_memory_mb(200, pb.override_budget(200, 1, CUBOID)) < 7757


def test_override_wins(monkeypatch):
    monkeypatch.setenv(pb.MULTIPLIER_ENV, "2")
    budget = pb.plan(200, 8 * GIB, CUBOID)
    assert budget.source == "override"
    assert budget.pairs == 2 * pb.UPSTREAM_CONTACT_PAIRS
    assert "MAPUSH_CONTACT_PAIRS_MULTIPLIER" in budget.describe()


@pytest.mark.parametrize("raw", ["abc", "0", "-1", "inf", "nan"])
def test_bad_override_names_the_variable(monkeypatch, raw):
    monkeypatch.setenv(pb.MULTIPLIER_ENV, raw)
    with pytest.raises(UsageError, match="MAPUSH_CONTACT_PAIRS_MULTIPLIER"):
        pb.plan(10, GIB, CUBOID)


class _Spec(object):
    def __init__(self, run_dir, device="cuda:0", num_envs=200):
        self.sim_device, self.run_dir, self.num_envs = device, str(run_dir), num_envs


def test_for_sim_logs_the_choice_and_stops_when_nothing_fits(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(pb, "sim_free_bytes", lambda device: 8 * GIB)
    pairs = pb.for_sim(_Spec(tmp_path), CUBOID)
    record = json.loads((tmp_path / pb.BUDGET_FILE).read_text())
    assert pairs == record["pairs"] == pb.choose_contact_pairs(200, 8 * GIB, CUBOID).pairs
    assert "max_gpu_contact_pairs" in capsys.readouterr().err
    assert pb.for_sim(_Spec(tmp_path, device="cpu"), CUBOID) is None
    monkeypatch.setattr(pb, "sim_free_bytes", lambda device: 64 * 1024 * 1024)
    with pytest.raises(Exception, match="lower --num-envs"):
        pb.for_sim(_Spec(tmp_path, num_envs=100000), CUBOID)
    monkeypatch.setenv(pb.MULTIPLIER_ENV, "1")
    assert pb.for_sim(_Spec(tmp_path), CUBOID) is None  # upstream's 2**23 x multiplier applies


MAKE_ENV = """
import json, sys
from mapush import sim
from mapush import physx_budget
physx_budget.sim_free_bytes = lambda device: 8 * 1024 ** 3
build_args = sim.build_args
def cpu_pipeline(spec, num_envs=None):  # the double then runs on the CPU of this machine
    args = build_args(spec, num_envs)
    args.use_gpu_pipeline = False
    return args
sim.build_args = cpu_pipeline
from mapush.spec import RunSpec
spec = RunSpec(algo="happo", task="go1push_mid", object=sys.argv[2], num_envs=200, steps=10,
               seed=1, run_dir=sys.argv[1], sim_device="cuda:0", rl_device="cuda:0")
env, cfg = sim.make_env(spec)
print(json.dumps({"pairs": cfg.sim.physx.max_gpu_contact_pairs}))
"""


@pytest.mark.parametrize("obj", ["cuboid", "cylinder"])
def test_make_env_passes_the_budget_to_the_config(tmp_path, obj):
    log = tmp_path / "double.jsonl"
    env = double_env(MQE_DOUBLE_LOG=log)
    env.pop(pb.MULTIPLIER_ENV, None)
    out = subprocess.run([sys.executable, "-c", MAKE_ENV, str(tmp_path), obj], env=env,
                         check=True, capture_output=True, text=True, timeout=120)
    bodies = pb.TaskBodies.of(object_facts(obj, DOUBLE_ROOT))
    assert bodies.robots == (3 if obj == "cylinder" else 2)
    record = json.loads((tmp_path / pb.BUDGET_FILE).read_text())
    assert record["shapes_per_env"] == bodies.shapes == bodies.robots * pb.SHAPES_PER_GO1 + 1
    expected = pb.choose_contact_pairs(200, 8 * GIB, bodies).pairs
    created = json.loads(log.read_text().splitlines()[0])
    assert created["contact_pairs"] == expected
    assert json.loads(out.stdout.strip().splitlines()[-1])["pairs"] == expected
    assert "max_gpu_contact_pairs = %d" % expected in out.stderr


def test_every_actor_with_a_collision_shape_is_counted():
    """Robots from the config, the object, and (upper task) obstacles; the target areas are
    illusions without collision unless their config says so (go1_object.py:95-120)."""
    cylinder = pb.TaskBodies.of(ObjectFacts(num_agents=3))
    assert cylinder.shapes == CUBOID.shapes + pb.SHAPES_PER_GO1
    upper = pb.TaskBodies.of(ObjectFacts(num_agents=2, num_obs=2, final_target=True))
    assert upper.shapes == CUBOID.shapes + 2
    solid = pb.TaskBodies.of(ObjectFacts(num_agents=2, num_obs=2, final_target=True,
                                         final_target_collides=True, target_collides=True))
    assert solid.shapes == upper.shapes + 2
    assert ObjectFacts(num_agents=2, num_obs=2, final_target=True).actors == 7
    assert pb.contacts_needed(100, cylinder) > pb.contacts_needed(100, CUBOID)
    assert pb.choose_contact_pairs(4096, 80 * GIB, cylinder).needed > \
        pb.choose_contact_pairs(4096, 80 * GIB, CUBOID).needed


def test_next_pow2_rounds_up_to_a_power_of_two():
    assert [pb.next_pow2(n) for n in (0, 1, 2, 3, 4, 5, 7, 8, 9)] == [1, 1, 2, 4, 4, 8, 8, 8, 16]
    assert pb.next_pow2(2 ** 20) == 2 ** 20 and pb.next_pow2(2 ** 20 + 1) == 2 ** 21


def test_the_model_is_the_one_docs_lifecycle_states():
    """docs/lifecycle.md ("What the envs need", "Margin", "Cost"): 47 shapes and 564
    contacts an env for the cuboid, 4x margin rounded up to a power of two and at least
    2**18 pairs, 256 bytes a pair; so 200 envs take 2**19 pairs (128 MiB) and 8 envs the
    floor. A GPU whose share is that buffer exactly keeps it; one byte short, it gets the
    one below it, down to the need (2**17 for 200 envs), and below the need it does not
    fit. The floor gives way to the memory too: 8 envs (2**13 needed) on a share of 16 MiB
    get 2**16."""
    assert CUBOID.shapes == 47 and pb.contacts_needed(1, CUBOID) == 564
    budget = pb.choose_contact_pairs(200, None, CUBOID)
    assert (budget.needed, budget.pairs, budget.bytes) == (112800, 2 ** 19, 128 * 1024 ** 2)
    assert pb.choose_contact_pairs(8, None, CUBOID).pairs == 2 ** 18
    share = int(1 / pb.CONTACT_SHARE)
    exact = pb.choose_contact_pairs(200, share * 128 * 1024 ** 2, CUBOID)
    assert exact.pairs == 2 ** 19 and exact.fits
    short = pb.choose_contact_pairs(200, share * (128 * 1024 ** 2 - 1), CUBOID)
    assert short.pairs == 2 ** 18 and short.fits
    starved = pb.choose_contact_pairs(200, share * (32 * 1024 ** 2 - 1), CUBOID)
    assert starved.pairs == 2 ** 17 and not starved.fits
    small = pb.choose_contact_pairs(8, share * 16 * 1024 ** 2, CUBOID)
    assert (small.needed, small.pairs, small.fits) == (4512, 2 ** 16, True)
    # the line each run prints
    assert pb.choose_contact_pairs(200, 8 * GIB, CUBOID).describe() == (
        "max_gpu_contact_pairs = 524288 (2**19) for 200 envs needing ~112800: 128 MiB of GPU "
        "memory (8192 MiB free)")
    assert budget.describe().endswith("(free memory unknown)")
    assert starved.describe().endswith("MiB free, DOES NOT FIT)")


def test_a_buffer_that_does_not_fit_stops_the_run_naming_what_it_needs(tmp_path, monkeypatch):
    """for_sim's refusal: what the buffer needs, what it may take of the free memory, and
    the fix, with the numbers of the case (200 envs: 2**17 pairs, 32 MiB)."""
    free = 100 * 1024 ** 2
    monkeypatch.setattr(pb, "sim_free_bytes", lambda device: free)
    with pytest.raises(MapushError) as refused:
        pb.for_sim(_Spec(tmp_path, device="cuda:1"), CUBOID)
    assert str(refused.value) == (
        "PhysX contact buffer for 200 envs needs 32 MiB but only 25 MiB of cuda:1's 100 MiB "
        "free may go to it: lower --num-envs, free the GPU (nvidia-smi), or check "
        "'mapush doctor --num-envs 200'")
