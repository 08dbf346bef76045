"""The authors' published policies, loaded strictly by the torch of the stack the suite runs
on (``make test`` and ``make test-stack``, both stacks): ``torch.load`` of the whole pickled
OpenRL ``PPOModule``, then ``act()`` as MAPush's high level calls it.

Needs ``MAPUSH_SRC`` (MAPush at the pin). The one stand-in is Isaac Gym's
``isaacgym._bindings.linux-x86_64.gym_38.SimType``, which the pickled run config names
(``gymapi.SIM_PHYSX``): it is written here, in a folder of its own, and nothing else of the
test double is on the path.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.upstream import REPO

SRC = os.environ.get("MAPUSH_SRC")
pytestmark = pytest.mark.skipif(not SRC, reason="needs MAPUSH_SRC (MAPush at the pin: its "
                                                "published checkpoints)")

# Obs dims: 2 + 3 x robots (go1_push_mid_wrapper.py:57 at the pin); the high level feeds its
# command net 3 + 3 x 2 - 1 = 8 (go1_push_upper_wrapper.py:124, 291); 3 actions (line 125;
# go1_push_mid_wrapper.py:58).
POLICIES = {
    "cuboid": ("results/10-15-23_cuboid/checkpoints/rl_model_100000000_steps/module.pt", 8),
    "Tblock": ("results/10-15-23_Tblock/checkpoints/rl_model_100000000_steps/module.pt", 8),
    "cylinder": ("results/10-15-23_cylinder/checkpoints/rl_model_100000000_steps/module.pt",
                 11),
    "command_net": ("resources/command_nets/1.2x1.2.pt", 8),
}
ACTIONS = 3
BATCH = 12

SIMTYPE = '''
class SimType(object):
    """Isaac Gym's pybind11 enum, as far as unpickling goes: SimType.__new__ + int state."""
    def __setstate__(self, state):
        self.value = int(state)
'''

# As go1_push_upper_wrapper.py:121-122 and 302 call it: numpy obs, zero RNN states
# (E*A, 1, 64), masks of ones, deterministic.
CHECK = r'''
import json, sys
import numpy as np
import torch
from mapush.checkpoints.policy import load_module  # torch.load of the whole module, strictly
path, dim, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
module = load_module(path, "cpu", "test")
rng = np.random.default_rng(0)
obs = rng.normal(size=(batch, dim)).astype(np.float32)
rnn = np.zeros((batch, 1, 64))
masks = np.ones((batch, 1))
with torch.no_grad():
    actions, states = module.act(obs, rnn, masks, deterministic=True)
actions = np.asarray(actions.cpu() if hasattr(actions, "cpu") else actions)
print(json.dumps({"type": type(module).__module__ + "." + type(module).__name__,
                  "shape": list(actions.shape), "finite": bool(np.isfinite(actions).all()),
                  "torch": torch.__version__}))
'''


@pytest.fixture(scope="module")
def simtype_only(tmp_path_factory):
    root = tmp_path_factory.mktemp("isaacgym-simtype")
    bindings = root / "isaacgym" / "_bindings" / "linux-x86_64"
    bindings.mkdir(parents=True)
    for folder in (root / "isaacgym", root / "isaacgym" / "_bindings", bindings):
        (folder / "__init__.py").write_text("")
    (bindings / "gym_38.py").write_text(SIMTYPE)
    return root


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_the_authors_policy_loads_strictly_and_acts(upstream, simtype_only, name):
    rel, dim = POLICIES[name]
    path = Path(SRC) / rel
    assert path.is_file(), "%s is missing from MAPUSH_SRC" % path
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(simtype_only),
                                                       str(upstream["site"]), str(REPO)]))
    proc = subprocess.run([sys.executable, "-c", CHECK, str(path), str(dim), str(BATCH)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["type"] == "openrl.modules.ppo_module.PPOModule"
    assert result["shape"] == [BATCH, ACTIONS] and result["finite"], result
