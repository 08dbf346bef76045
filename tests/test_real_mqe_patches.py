"""Each of our MAPush patches, tested by running the code it changes: real MQE over the
Isaac Gym stand-in, patched as the image patches it, against pristine upstream (or, where
pristine MQE cannot run on a CPU pipeline at all, upstream with only the device patches
01-03 applied). Each case runs in a subprocess (tests/real_mqe_probe.py): Isaac Gym must be
imported before torch."""
import json
import subprocess
import sys

import pytest

from mapush import physx_budget as pb
from tests.conftest import REPO, real_env

pytestmark = pytest.mark.real_mqe

PROBE = REPO / "tests" / "real_mqe_probe.py"


def probe(real, case, n=3, **env):
    proc = subprocess.run([sys.executable, str(PROBE), case, str(n)], capture_output=True,
                          text=True, env=real_env(real, **env), cwd=str(real["tree"].parent),
                          timeout=300)
    return proc, (json.loads(proc.stdout.strip().splitlines()[-1])
                  if proc.returncode == 0 else None)


def test_01_the_contact_pair_multiplier_reaches_the_sim_params(real_mqe, pristine):
    _, ours = probe(real_mqe, "contact_pairs")
    _, tripled = probe(real_mqe, "contact_pairs", MAPUSH_CONTACT_PAIRS_MULTIPLIER=3)
    _, upstream = probe(pristine, "contact_pairs")
    assert ours["max_gpu_contact_pairs"] == [1000] and ours["error"] is None
    assert tripled["max_gpu_contact_pairs"] == [3000]
    # upstream multiplies by 5 (base_task.py:44), whatever is asked
    assert upstream["max_gpu_contact_pairs"] == [5000]


def test_01_a_bad_multiplier_fails_before_the_sim_exists(real_mqe):
    _, bad = probe(real_mqe, "contact_pairs", MAPUSH_CONTACT_PAIRS_MULTIPLIER="-2")
    assert bad["max_gpu_contact_pairs"] == []
    assert "MAPUSH_CONTACT_PAIRS_MULTIPLIER='-2'" in bad["error"]


UPSTREAM_BUDGET_FACTS = r"""
import isaacgym  # before torch, which mqe imports (here the stand-in)
import json, re
from pathlib import Path
from mqe import LEGGED_GYM_ROOT_DIR
from mqe.envs.configs.go1_push_mid_config import Go1PushMidCfg as Cfg
urdfs = [Cfg.asset.file] + list(Cfg.asset.files)
shapes = [len(re.findall(r"<collision\b", Path(u.format(LEGGED_GYM_ROOT_DIR=LEGGED_GYM_ROOT_DIR))
                         .read_text())) for u in urdfs]
print(json.dumps({"pairs": Cfg.sim.physx.max_gpu_contact_pairs, "shapes": shapes}))
"""


def test_01_the_budget_starts_from_upstreams_contact_pairs_and_go1_shapes(pristine):
    """What mapush/physx_budget.py takes from upstream, read through pristine
    MQE's own config classes: max_gpu_contact_pairs before base_task.py's x5
    (legged_robot_config.py:227), and the collision shapes of every Go1 URDF the mid
    level's config names (go1_config.py:57-62; the budget counts each <collision> as one
    shape, as docs/lifecycle.md says)."""
    proc = subprocess.run([sys.executable, "-c", UPSTREAM_BUDGET_FACTS], capture_output=True,
                          text=True, env=real_env(pristine), cwd=str(pristine["tree"].parent),
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert facts["pairs"] == pb.UPSTREAM_CONTACT_PAIRS
    assert len(facts["shapes"]) == 5 and set(facts["shapes"]) == {pb.SHAPES_PER_GO1}, facts


PARSED_AND_IMPORTED = r"""
import isaacgym  # before torch, which mqe imports (here the stand-in)
import json
from dataclasses import asdict
from mapush import sim
from mapush.objects import ObjectFacts, find_objects, object_config_path, read_object_facts
from mqe import LEGGED_GYM_ROOT_DIR
from mqe.envs.configs.go1_push_upper_config import Go1PushUpperCfg
upper = LEGGED_GYM_ROOT_DIR + "/mqe/envs/configs/go1_push_upper_config.py"
found = {obj: (read_object_facts(object_config_path(obj)), ObjectFacts.from_config(
    sim.load_object_config(obj))) for obj in find_objects()}
found["upper"] = (read_object_facts(upper), ObjectFacts.from_config(Go1PushUpperCfg))
print(json.dumps({k: [asdict(parsed), asdict(imported), parsed.obs_dim, parsed.actors]
                  for k, (parsed, imported) in found.items()}))
"""


def test_object_facts_parsed_are_those_upstreams_configs_give_when_imported(pristine):
    """mapush/objects.py reads an object config without importing it (the parent has no
    Isaac Gym); sim.py reads the imported class. For every object config at the pin and
    the high level's (staged as an upper run's task/config.py, which eval parses), both
    give the same facts; the upper config's: 2 robots, 2 obstacles and a final target, so
    7 actors an env (go1_push_upper_config.py:10-11,36)."""
    proc = subprocess.run([sys.executable, "-c", PARSED_AND_IMPORTED], capture_output=True,
                          text=True, env=real_env(pristine), cwd=str(pristine["tree"].parent),
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert sorted(facts) == ["Tblock", "cuboid", "cylinder", "upper"]
    for name, (parsed, imported, _dim, _actors) in facts.items():
        assert parsed == imported, name
    assert {k: (v[0]["num_agents"], v[2], v[3]) for k, v in facts.items()} == {
        "Tblock": (2, 8, 4), "cuboid": (2, 8, 4), "cylinder": (3, 11, 5), "upper": (2, 8, 7)}
    assert facts["upper"][0]["num_obs"] == 2 and facts["upper"][0]["final_target"]


@pytest.mark.parametrize("case", ["devices_mid", "devices_upper"])
def test_02_03_every_tensor_follows_the_env_device(real_mqe, pristine, case):
    """Sim on the CPU: every tensor of the wrapper and the env is on the env's device, after
    reset and steps. Pristine MQE makes tensors on "cuda" and cannot run at all."""
    proc, facts = probe(real_mqe, case)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert facts["env_device"] == "cpu" and facts["obs_device"] == "cpu"
    assert len(facts["devices"]) > 50
    assert {d for d in facts["devices"].values()} == {"cpu"}, facts["devices"]
    proc, _ = probe(pristine, case)
    # a tensor made on "cuda" fails where there is none (the message varies with torch)
    assert proc.returncode != 0 and "torch/cuda/__init__.py" in proc.stderr and \
        'device="cuda"' in proc.stderr, proc.stderr[-2000:]


def test_04_rrt_plans_only_when_evaluation_asks(real_mqe, device_only):
    proc, ours = probe(real_mqe, "rrt_resets")
    assert proc.returncode == 0, proc.stderr[-3000:]
    # four resets, as upstream's test.py makes: never planned, until asked
    assert ours["planned_at_reset"] == [False, False, False, False]
    assert ours["asked"]["envs"] == 3 and ours["asked"]["planned"] + ours["asked"]["failed"] == 3
    proc, upstream = probe(device_only, "rrt_resets")
    assert proc.returncode == 0, proc.stderr[-3000:]
    # upstream plans on the wrapper's 4th reset only (go1_push_upper_wrapper.py:190)
    assert upstream["planned_at_reset"] == [False, False, False, True]
    assert upstream["asked"] is None


def test_05_obstacle_collision_degree_over_the_obstacles_with_the_config_threshold(
        real_mqe, device_only):
    proc, ours = probe(real_mqe, "obstacle_degree")
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the box 1.4, 2.2 and 0.6 m from the last obstacle slot; the config's 1.8 m threshold
    assert ours["threshold"] == 1.8 and ours["upstream_threshold"] == 1.0
    assert ours["obstacle_collision_degree"] == [1.0, 0.0, 1.0]
    # upstream's count looks at slots 2..3 (the final target, obstacle 1), moved away here
    assert ours["collision_degree"] == [0.0, 0.0, 0.0]
    proc, upstream = probe(device_only, "obstacle_degree")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert upstream["obstacle_collision_degree"] is None
    assert upstream["collision_degree"] == [0.0, 0.0, 0.0]


def test_05_the_degrees_over_a_real_collision_counted_by_hand(real_mqe):
    """The high level's published command net pushes the box into an obstacle (the stand-in's
    contact, tests/standin/isaacgym/contact.py) towards a sub-goal beyond it. MQE's three
    degree buffers, over 900 steps, equal the counts made here from the positions after each
    step: our obstacle count (the last num_obs NPC slots, the calculator's 1.8 m), upstream's
    collision count (slots 2..3: the final target and the far obstacle) and the collaboration
    count (both robots within the goal's threshold of the box)."""
    proc, run = probe(real_mqe, "obstacle_push", 2)
    assert proc.returncode == 0, proc.stderr[-3000:]
    k = run["num_obs"]
    assert k == 2 and run["obstacle_threshold"] == 1.8 and run["collision_threshold"] == 1.0

    def dist(a, b):
        return ((a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2) ** 0.5

    hand = {"obstacle_collision_degree": [0, 0], "collision_degree": [0, 0],
            "collaboration_degree": [0, 0]}
    for reset, npcs, robots in zip(run["init_reset"], run["npcs"], run["robots"]):
        for e in range(2):
            if reset[e]:
                continue
            box = npcs[e][0]
            hand["obstacle_collision_degree"][e] += min(
                dist(box, o) for o in npcs[e][-k:]) < run["obstacle_threshold"]
            hand["collision_degree"][e] += min(
                dist(box, o) for o in npcs[e][2:2 + k]) < run["collision_threshold"]
            hand["collaboration_degree"][e] += all(
                dist(box, r) < run["collaboration_threshold"] for r in robots[e])
    assert run["counted"] == {key: [float(v) for v in counts] for key, counts in hand.items()}
    steps = len(run["npcs"])
    for e in range(2):
        near = [dist(npcs[e][0], npcs[e][-1]) for npcs in run["npcs"]]
        # a real collision: the box reaches the fixed obstacle (1.1 m between the centres of
        # the 1.2 m box and the 1 m obstacle face to face, up to 1.35 m where a corner of the
        # turned box meets it; over the friction-bounded Go1s it comes 1.21-1.32 m, turned)
        # and is held at it for the last third, pushed towards a sub-goal beyond it
        assert near[0] > 1.8 and min(near) < 1.35
        assert max(near[-steps // 3:]) < 1.5
        # partial counts: the box came from beyond the threshold
        assert 0 < run["counted"]["obstacle_collision_degree"][e] < steps
    # upstream's count looks at the final target and the obstacle moved away: none
    assert run["counted"]["collision_degree"] == [0.0, 0.0]
