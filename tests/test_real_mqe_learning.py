"""PPO learns to push over MAPush's real MQE and the Isaac Gym stand-in, on the CPU, in CI
(#48 item 4), against its control in the same test (#79 item 4): ``mapush train`` from
scratch, seeded, 256,000 env steps, with the authors' cuboid training config
(results/10-15-23_cuboid) and two settings set from the command line to bring the first
pushes within a short run: 5 s episodes, and the target 1.2-1.6 m from the box (1.5-3.0 m in
the config; success is the box within 1 m of it). The control is the same run with the
learning rates at 0 (``--set lr=0 --set critic_lr=0``): the same seed, envs and first
update, a policy that never changes. MQE's ``push_reward`` (the box moving, rewarded while
the robots push it) is logged every 5 updates.

The bar and its margin, stated: over the bounded Go1 drive (#79 item 1), the learner's
push_reward peaked at 6.05 on the host (Python 3.11, torch 2.13, 2 cores; 5.02 its last two
logs' mean) and at 1.47 in the image (torch 1.13, one thread: it rose by update 20 and fell
back to 0.02-0.14, an open finding); the control never passed 0.047. The bar, BAR = 0.4,
lies between the control's peak and the learner's, 3.7x under the image's peak and 8.5x over
the control's: the learner's peak must clear it and the control's must not. Some env has
succeeded during the learner's run. On an H200, at 500 envs and without the two
settings, the curves of benchmarks/results/learning-*.json."""
import pytest

from tests.conftest import real_env, run_mapush
from tests.test_openrl_train import scalars

pytestmark = pytest.mark.real_mqe

BAR = 0.4
SETS = ["--set", "task.env.episode_length_s=5",
        "--set", "task.goal.random_goal_distance_from_init=[1.2,1.6]"]


def train(real_mqe, tmp_path, name, steps, *extra):
    """push_reward and success_rate of one seeded run, in order of step."""
    config = real_mqe["tree"] / "results" / "10-15-23_cuboid" / "task" / "config.py"
    run = tmp_path / name
    proc = run_mapush(["train", "--object", "cuboid", "--object-config", config,
                       "--num-envs", 32, "--steps", steps, "--seed", 1, "--run-dir", run,
                       "--no-preflight", "--sim-device", "cpu", "--rl-device", "cpu"]
                      + SETS + list(extra), real_env(real_mqe), cwd=tmp_path, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    logged = scalars(run)
    return ([value for _, value in sorted(logged["reward/push_reward"])],
            [value for _, value in sorted(logged["metrics/success_rate"])])


# the two trainings took 18 minutes in the image beside another test: past pytest-timeout's
# 900 s default (pyproject.toml), a hang guard of 40 min (5.8x the 415 s CI took)
@pytest.mark.timeout(2400)
def test_ppo_learns_to_push_the_cuboid_over_the_stand_in(real_mqe, tmp_path):
    # The control's policy never changes, so each of its updates draws push_reward from one
    # distribution: its first 10 updates (2 logs) are its last two logs' worth, at a quarter
    # of the learner's cost (its 8 logs never passed 0.047 over the bounded drive).
    control, _ = train(real_mqe, tmp_path, "control", 64000, "--set", "lr=0",
                       "--set", "critic_lr=0")
    push, success = train(real_mqe, tmp_path, "learner", 256000)
    print("push_reward: learner %s, control (lr 0) %s; success %s" % (push, control, success))
    assert len(push) >= 6 and len(control) >= 2, (push, control)
    # the peak, not the last logs: in the image (torch 1.13, one thread) the learner rose to
    # 1.47 at update 20 and fell back to 0.02-0.14 by update 40 (on the host it held 5.02):
    # the rise is what separates learning from the control, the collapse is noted as open
    assert max(push) >= BAR, push
    assert max(control) < BAR, control
    assert max(success) > 0, success
