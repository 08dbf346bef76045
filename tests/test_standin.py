"""The Isaac Gym stand-in itself (tests/standin): what MQE relies on from Isaac Gym, checked
from first principles. Each check runs in a subprocess, as the stand-in (like Isaac Gym)
refuses to load after torch, which this process has imported."""
import json
import subprocess
import sys

import pytest

from tests.conftest import REPO, STANDIN

GO1 = "resources/robots/go1/urdf/go1.urdf"


def run(script, *args):
    env = {"PYTHONPATH": str(STANDIN), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", script] + [str(a) for a in args],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


URDF = """<robot name="r">
  <link name="base"><collision/><collision/><inertial><mass value="2"/></inertial></link>
  <joint name="fix" type="fixed"><parent link="base"/><child link="plate"/></joint>
  <link name="plate"><collision/><inertial><mass value="0.5"/></inertial></link>
  <joint name="B_joint" type="revolute"><parent link="base"/><child link="B_leg"/>
    <limit lower="-1" upper="2" effort="30" velocity="20"/></joint>
  <link name="B_leg"><collision/></link>
  <joint name="A_joint" type="continuous"><parent link="base"/><child link="A_leg"/></joint>
  <link name="A_leg"><collision/></link>
  <joint name="A_foot_fixed" type="fixed" dont_collapse="true">
    <parent link="A_leg"/><child link="A_foot"/></joint>
  <link name="A_foot"/>
</robot>"""

ASSET = """
import json, sys
from isaacgym import gymapi
gym = gymapi.acquire_gym()
sim = gym.create_sim(0, 0, gymapi.SIM_PHYSX, gymapi.SimParams())
opts = gymapi.AssetOptions()
opts.collapse_fixed_joints = sys.argv[2] == "1"
opts.default_dof_drive_mode = 3
asset = gym.load_asset(sim, sys.argv[1].rsplit("/", 1)[0], sys.argv[1].rsplit("/", 1)[1], opts)
props = gym.get_asset_dof_properties(asset)
print(json.dumps({"bodies": gym.get_asset_rigid_body_names(asset),
                  "dofs": gym.get_asset_dof_names(asset),
                  "shapes": len(gym.get_asset_rigid_shape_properties(asset)),
                  "fields": list(props.dtype.names), "limits": props["hasLimits"].tolist(),
                  "lower": props["lower"].tolist(), "mode": props["driveMode"].tolist(),
                  "effort": props["effort"].tolist()}))
"""


@pytest.mark.parametrize("collapse", [True, False])
def test_assets_read_bodies_dofs_and_shapes_as_isaac_gyms_importer(tmp_path, collapse):
    urdf = tmp_path / "r.urdf"
    urdf.write_text(URDF)
    facts = run(ASSET, urdf, int(collapse))
    if collapse:  # plate merged into base (its shape with it); A_foot kept (dont_collapse)
        assert facts["bodies"] == ["base", "A_leg", "A_foot", "B_leg"]
    else:
        assert facts["bodies"] == ["base", "A_leg", "A_foot", "B_leg", "plate"]
    assert facts["shapes"] == 5
    # DOFs in body order, siblings by name; a continuous joint has no limits
    assert facts["dofs"] == ["A_joint", "B_joint"]
    assert facts["fields"] == ["hasLimits", "lower", "upper", "driveMode", "velocity",
                               "effort", "stiffness", "damping", "friction", "armature"]
    assert facts["limits"] == [False, True] and facts["lower"] == [0.0, -1.0]
    assert facts["mode"] == [3, 3] and facts["effort"] == [0.0, 30.0]


def test_go1_reads_as_isaac_gym_lists_it():
    """Go1 at the pin: 17 bodies and 12 DOFs, legs FL, FR, RL, RR (walk-these-ways' order),
    though its URDF declares FR, FL, RR, RL."""
    import os

    src = os.environ.get("MAPUSH_SRC")
    if not src:
        pytest.skip("MAPUSH_SRC is not set: no Go1 URDF at hand")
    facts = run(ASSET, os.path.join(src, GO1), 1)
    legs = ["FL", "FR", "RL", "RR"]
    assert facts["bodies"] == ["base"] + ["%s_%s" % (leg, part) for leg in legs
                                          for part in ("hip", "thigh", "calf", "foot")]
    assert facts["dofs"] == ["%s_%s_joint" % (leg, part) for leg in legs
                             for part in ("hip", "thigh", "calf")]


MATH = """
import json, math
from isaacgym import torch_utils as tu
import torch
torch.manual_seed(0)
r, p, y = torch.rand(64) * 2 - 1, torch.rand(64) * 1.2 - 0.6, torch.rand(64) * 6 - 3
q = tu.quat_from_euler_xyz(r, p, y)
back = tu.get_euler_xyz(q)
two_pi = 2 * math.pi
def rot(axis, a):
    c, s = torch.cos(a), torch.sin(a)
    o, z = torch.ones_like(a), torch.zeros_like(a)
    if axis == "x":
        return torch.stack([o, z, z, z, c, -s, z, s, c], -1).view(-1, 3, 3)
    if axis == "y":
        return torch.stack([c, z, s, z, o, z, -s, z, c], -1).view(-1, 3, 3)
    return torch.stack([c, -s, z, s, c, z, z, z, o], -1).view(-1, 3, 3)
m = rot("z", y) @ rot("y", p) @ rot("x", r)
v = torch.randn(64, 3)
q2 = tu.quat_from_euler_xyz(torch.rand(64), torch.rand(64), torch.rand(64))
print(json.dumps({
  "unit": float((q.norm(dim=-1) - 1).abs().max()),
  "euler": max(float(((a % two_pi) - b).abs().max()) for a, b in zip((r, p, y), back)),
  "range": all(bool(((b >= 0) & (b < two_pi)).all()) for b in back),
  "rotate": float((tu.quat_rotate(q, v) - (m @ v.unsqueeze(-1)).squeeze(-1)).abs().max()),
  "inverse": float((tu.quat_rotate_inverse(q, tu.quat_rotate(q, v)) - v).abs().max()),
  "mul": float((tu.quat_apply(tu.quat_mul(q, q2), v)
                - tu.quat_apply(q, tu.quat_apply(q2, v))).abs().max()),
  "axis_angle": float((tu.quat_from_angle_axis(torch.tensor([math.pi / 2]),
                       torch.tensor([[0., 0., 2.]])) - torch.tensor(
                       [[0, 0, math.sin(math.pi / 4), math.cos(math.pi / 4)]])).abs().max()),
}))
"""


def test_torch_utils_rotate_as_the_rotation_matrices_do():
    facts = run(MATH)
    assert facts["unit"] < 1e-6 and facts["range"]
    assert facts["euler"] < 1e-5  # each angle back, wrapped into [0, 2 pi)
    assert facts["rotate"] < 1e-5 and facts["inverse"] < 1e-5
    assert facts["mul"] < 1e-5 and facts["axis_angle"] < 1e-6


TENSORS = """
import json
from isaacgym import gymapi, gymtorch
import torch
gym = gymapi.acquire_gym()
params = gymapi.SimParams()
params.dt = 0.5
sim = gym.create_sim(0, 0, gymapi.SIM_PHYSX, params)
box = gym.create_box(sim, 1, 1, 1)
envs = [gym.create_env(sim, gymapi.Vec3(), gymapi.Vec3(), 1) for _ in range(3)]
for i, env in enumerate(envs):
    gym.create_actor(env, box, gymapi.Transform(gymapi.Vec3(i, 0, 0)), "box", i, 0, 0)
gym.prepare_sim(sim)
root = gymtorch.wrap_tensor(gym.acquire_actor_root_state_tensor(sim))
before = root.clone()
gym.refresh_actor_root_state_tensor(sim)
refreshed = root[:, 0].tolist()
root[:, 7] = 2.0  # x velocity of every box, but only box 1 is written back
gym.set_actor_root_state_tensor_indexed(sim, gymtorch.unwrap_tensor(root),
    gymtorch.unwrap_tensor(torch.tensor([1], dtype=torch.int32)), 1)
gym.simulate(sim)
stale = root[:, 0].tolist()
gym.refresh_actor_root_state_tensor(sim)
print(json.dumps({"before": before[:, 0].tolist(), "refreshed": refreshed,
                  "stale": stale, "after": root[:, 0].tolist(), "shape": list(root.shape),
                  "index": gym.get_actor_index(envs[2], 0, gymapi.DOMAIN_SIM)}))
"""


def test_state_tensors_refresh_and_set_as_isaac_gym_documents():
    facts = run(TENSORS)
    assert facts["shape"] == [3, 13] and facts["index"] == 2
    assert facts["before"] == [0, 0, 0]  # nothing until the first refresh
    assert facts["refreshed"] == [0, 1, 2]
    assert facts["stale"] == [0, 1, 2]  # simulate does not touch the tensor
    # only the indexed actor's velocity reached the physics: 0.5 s at 2 m/s
    assert facts["after"] == [0, 2, 2]


def test_it_refuses_to_load_after_torch():
    proc = subprocess.run([sys.executable, "-c", "import torch, isaacgym"],
                          capture_output=True, text=True,
                          env={"PYTHONPATH": str(STANDIN), "PATH": "/usr/bin:/bin"},
                          timeout=120)
    assert proc.returncode != 0
    assert "PyTorch was imported before isaacgym modules" in proc.stderr


def test_gymapi_alone_imports_no_torch_as_isaac_gyms_own():
    """Isaac Gym's gymapi.py imports importlib, json, sys, os and its bindings, no torch (only
    gymtorch needs it): mapush doctor's import probe is as quick over the stand-in."""
    found = run("import json, sys\nfrom isaacgym import gymapi\n"
                "gymapi.acquire_gym()\nprint(json.dumps('torch' in sys.modules))")
    assert found is False


def test_prepare_tree_refuses_a_folder_that_is_no_mapush_checkout(tmp_path):
    proc = subprocess.run([sys.executable, str(STANDIN / "prepare_tree.py"), str(tmp_path),
                           str(tmp_path / "dest")], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and not (tmp_path / "dest").exists()
    assert proc.stderr.startswith("error: SRC %s is not a MAPush checkout" % tmp_path)


SCRIPTED = """
import json
from isaacgym import gymapi, gymtorch, torch_utils as tu
import torch
plain = sorted(n for n, f in vars(tu).items() if callable(f) and not n.startswith("_")
               and not isinstance(f, torch.jit.ScriptFunction) and f.__module__ == tu.__name__)
refused = {}
for label, call in [("torch.device", lambda: tu.torch_rand_float(0.0, 1.0, (2, 3),
                                                                 torch.device("cpu"))),
                    ("copysign of a tensor", lambda: tu.copysign(torch.ones(2), torch.ones(2))),
                    ("float64 gym tensor", lambda: gymtorch.unwrap_tensor(torch.zeros(2).double())),
                    ("bool gym tensor", lambda: gymtorch.unwrap_tensor(torch.zeros(2).bool()))]:
    try:
        call()
        refused[label] = False
    except Exception:
        refused[label] = True
gym = gymapi.acquire_gym()
sim = gym.create_sim(0, 0, gymapi.SIM_PHYSX, gymapi.SimParams())
box = gym.create_box(sim, 1, 1, 1)
env = gym.create_env(sim, gymapi.Vec3(), gymapi.Vec3(), 1)
gym.create_actor(env, box, gymapi.Transform(), "box", 0, 0, 0)
gym.prepare_sim(sim)
root = gymtorch.wrap_tensor(gym.acquire_actor_root_state_tensor(sim))
for label, call in [
        ("int64 indices", lambda: gym.set_actor_root_state_tensor_indexed(
            sim, gymtorch.unwrap_tensor(root), gymtorch.unwrap_tensor(torch.zeros(1).long()), 1)),
        ("float16 state", lambda: gym.set_actor_root_state_tensor(
            sim, gymapi.Tensor(root.half())))]:
    try:
        call()
        refused[label] = False
    except Exception:
        refused[label] = True
print(json.dumps({"plain": plain, "refused": refused,
                  "rand": list(tu.torch_rand_float(0.0, 1.0, (2, 3), "cpu").shape)}))
"""


def test_torch_utils_is_torchscript_and_refuses_what_isaac_gyms_refuses():
    """Isaac Gym compiles its torch_utils with TorchScript: only to_torch, get_axis_params
    and unscale_np stay Python, and the compiled ones take the argument types their
    signatures declare (torch_rand_float's device: a str, not a torch.device). gymtorch refuses
    dtypes it cannot map, and the setters want int32 indices and float32 state."""
    facts = run(SCRIPTED)
    assert facts["plain"] == ["get_axis_params", "to_torch", "unscale_np"]
    assert facts["rand"] == [2, 3]
    assert facts["refused"] == {k: True for k in facts["refused"]}, facts["refused"]


COLD = """
import json, sys
sys.path.insert(0, sys.argv[1])
from tests.real_mqe_probe import host_transfers
from isaacgym import torch_utils as tu
import torch
q = torch.nn.functional.normalize(torch.randn(16, 4), dim=-1)
sinp = torch.tensor([1.5, -1.0, 0.5, -0.0])
_, copysign = host_transfers(lambda: tu.copysign(3.14, sinp))
_, euler = host_transfers(lambda: tu.get_euler_xyz(q))
_, rotate = host_transfers(lambda: tu.quat_rotate_inverse(q, q[:, :3]))
_, item = host_transfers(lambda: q.sum().item())
_, lifted = host_transfers(lambda: q * torch.tensor([1.0, 2.0, 3.0, 4.0]))
_, read = host_transfers(lambda: q.cpu().numpy())
print(json.dumps({"copysign": copysign, "euler": euler, "rotate": rotate, "item": item,
                  "lifted": lifted, "read": read}))
"""


def test_the_capture_check_sees_isaac_gyms_host_copy_cold():
    """tests/real_mqe_probe.host_transfers, what the emulated CUDA graphs count: it sees the
    host-to-device copy of Isaac Gym's copysign (and so of get_euler_xyz) on the first call,
    inside TorchScript, where no aten op shows it on the CPU; .item(), a tensor made of host
    data and Tensor.cpu/numpy too; a rotation, which copies nothing, counts nothing."""
    facts = run(COLD, REPO)
    assert facts["copysign"] == {"copysign: aten::tensor": 1}
    assert facts["euler"] == {"get_euler_xyz: aten::tensor": 1}
    assert facts["rotate"] == {}
    assert facts["item"] == {"aten::_local_scalar_dense": 1}
    assert facts["lifted"] == {"aten::lift_fresh": 1}  # torch 1.13 and 2.x alike
    assert facts["read"] == {"Tensor.cpu": 1, "Tensor.numpy": 1}


CONTACT = """
import json
from types import SimpleNamespace as NS
import mujoco
import numpy as np
from isaacgym import contact

def actor(env, group, footprint=(), fixed=False, mass=4.0):
    return NS(env=env, collision_group=group, filter=0, shape_props=[NS(friction=1.0)],
              asset=NS(options=NS(fix_base_link=fixed), mass=mass, footprint=list(footprint)))

box, post = [("box", [0.6, 0.6, 0.6], 0.0, 0.0, 0.0)], [("cylinder", 0.2, 0.0, 0.0, 0.0)]
envs = object(), object()
# env 0: a Go1 touching a box from behind; env 1: the same, the box touching a fixed post
actors = [actor(envs[0], 0, mass=16.3), actor(envs[0], 0, box),
          actor(envs[1], 1, mass=16.3), actor(envs[1], 1, box), actor(envs[1], 1, post, True)]
plane = contact.Plane(actors, [0, 2], 9.81, 0.1, 0.005)
root = np.zeros((5, 13))
root[:, 6] = 1.0
root[:, 0] = [0.0, 0.6, 0.0, 0.62, 1.05]
m, d = plane.model, plane.data
row_of = {mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "a%d" % r): r for r in plane.rows}
worst, scale, touched, net = 0.0, 0.0, set(), 0.0
wrench = np.zeros(6)
for _ in range(30):
    forces = plane.step(root, np.array([[0.5, 0.0, 0.0], [0.5, 0.0, 0.0]]))
    expected = np.zeros((5, 3))  # each contact's force, from mj_contactForce, on both bodies
    for i in range(d.ncon):
        c = d.contact[i]
        mujoco.mj_contactForce(m, d, i, wrench)
        world = c.frame.reshape(3, 3).T @ wrench[:3]  # on geom2, from geom1
        expected[row_of[m.geom_bodyid[c.geom1]]] -= world
        expected[row_of[m.geom_bodyid[c.geom2]]] += world
    got = np.zeros((5, 3))
    got[plane.rows] = forces
    worst = max(worst, float(np.abs(got - expected).max()))
    scale = max(scale, float(np.abs(expected).max()))
    touched |= {r for r in range(5) if np.abs(got[r]).max() > 0}
    net = max(net, float(np.abs(got.sum(0)).max()))
print(json.dumps({"worst": worst, "scale": scale, "touched": sorted(touched), "net": net,
                  "shape": list(forces.shape), "box_x": [root[1, 0], root[3, 0]]}))
"""


def test_contact_forces_are_each_contacts_force_summed_per_body():
    """The plane's net contact force per actor (``contact.Plane.step``, read from MuJoCo's
    per-body constraint wrench) is the sum of each contact's own force (``mj_contactForce``,
    world frame) on the bodies it touches: Go1s pushing boxes, one box against a fixed post."""
    out = run(CONTACT)
    assert out["shape"] == [5, 3]
    assert out["scale"] > 1.0  # real pushes, in newtons
    assert out["worst"] <= 1e-9 * out["scale"], out
    assert out["touched"] == [0, 1, 2, 3, 4]  # the post (fixed) included
    assert out["net"] <= 1e-9 * out["scale"]  # action and reaction
    assert out["box_x"][0] > 0.6 + 0.05 and out["box_x"][1] < 0.62 + 0.01  # pushed; held


DRIVE = """
import json
from types import SimpleNamespace as NS
import numpy as np
from isaacgym import contact

def actor(env, footprint=(), fixed=False, mass=16.3):
    return NS(env=env, collision_group=0, filter=0, shape_props=[NS(friction=1.0)],
              asset=NS(options=NS(fix_base_link=fixed), mass=mass, footprint=list(footprint)))

heavy, post = [("box", [0.6, 0.6, 0.6], 0.0, 0.0, 0.0)], [("cylinder", 0.2, 0.0, 0.0, 0.0)]
e = [object() for _ in range(5)]
# env 0: a Go1 walks into a fixed post; env 1: one Go1 behind a 24 kg box; env 2: two Go1s
# behind it side by side; env 3: a Go1 alone, from rest; env 4: a Go1 walks into a standing
# one of half its mass
actors = [actor(e[0]), actor(e[0], post, True), actor(e[1]), actor(e[1], heavy, mass=24.0),
          actor(e[2]), actor(e[2]), actor(e[2], heavy, mass=24.0), actor(e[3]),
          actor(e[4]), actor(e[4], mass=8.15)]
walkers = [0, 2, 4, 5, 7, 8, 9]
plane = contact.Plane(actors, walkers, 9.81, 0.1, 0.005)
root = np.zeros((10, 13))
root[:, 6] = 1.0
root[:, 0] = [0.0, 0.55, 0.0, 0.64, 0.0, 0.0, 0.64, 0.0, 0.0, 0.7]
root[:, 1] = [0.0, 0.0, 0.0, 0.0, 0.15, -0.15, 0.0, 0.0, 0.0, 0.0]
command = np.array([[0.5, 0, 0], [0.5, 0, 0], [0.5, 0, 0], [0.5, 0, 0], [1.0, 0, 0],
                    [0.5, 0, 0], [0.0, 0, 0]])
speed, post_force = [], []
for step in range(400):
    if step == 200:
        half = root[[3, 6], 0].copy()
    forces = plane.step(root, command)
    speed.append(float(root[7, 7]))
    post_force.append(float(np.linalg.norm(forces[plane.rows.index(1)][:2])))
print(json.dumps({"post": post_force[-1], "speed": speed, "box_alone": root[3, 0] - half[0],
                  "box_pair": root[6, 0] - half[1], "pushed": root[9, 0] - 0.7,
                  "mu_m_g": 0.5 * (0.1 + 1.0) * 16.3 * 9.81, "servo": contact.SERVO_S}))
"""


def test_a_go1_pushes_with_at_most_what_its_feet_take_from_the_ground():
    """#79 item 1: a Go1's drive is bounded by Coulomb friction, mu * m * g (mu the mean of
    the ground's 0.1 and the robot's 1.0, PhysX's combine; m 16.3 kg, the Go1 asset's):
    against a fixed post it presses with exactly that; alone it cannot move a 24 kg box (whose
    ground friction, 129 N, is more), two side by side can; from rest it accelerates at most mu * g
    and then follows its command as a first-order lag of SERVO_S; it pushes away a standing
    Go1 of half its mass, whose feet hold only half as much."""
    out = run(DRIVE)
    bound = out["mu_m_g"]
    assert out["post"] == pytest.approx(bound, rel=1e-3)
    # over the last second (the first has the impact's shove): MuJoCo's friction is soft, so
    # a force under the bound leaves a creep of millimetres a second
    assert abs(out["box_alone"]) < 0.01
    assert out["box_pair"] > 0.4
    dt, speed = 0.005, out["speed"]
    for step, v in enumerate(speed[:40]):  # the friction-bounded ramp: mu * g per second
        assert v <= 0.55 * 9.81 * dt * (step + 1) + 1e-9, (step, v)
    assert speed[20] > 0.9 * 0.55 * 9.81 * dt * 21
    assert speed[-1] == pytest.approx(1.0, abs=1e-6)
    assert out["pushed"] > 0.5


TIMED = """
import json, sys
from isaacgym import gymapi
gym = gymapi.acquire_gym()
sim = gym.create_sim(0, 0, gymapi.SIM_PHYSX, gymapi.SimParams())
asset = gym.load_asset(sim, sys.argv[1].rsplit("/", 1)[0], sys.argv[1].rsplit("/", 1)[1],
                       gymapi.AssetOptions())
env = gym.create_env(sim, gymapi.Vec3(), gymapi.Vec3(1, 1, 1), 1)
gym.create_actor(env, asset, gymapi.Transform(), "r", 0, 0)
gym.prepare_sim(sim)
for _ in range(3):
    gym.simulate(sim)
    gym.fetch_results(sim, True)
print(json.dumps({"wrapped": hasattr(gymapi.Gym.simulate, "__wrapped__")}))
"""


@pytest.mark.parametrize("timed", [True, False])
def test_the_stand_ins_own_time_is_counted_per_call_once(tmp_path, timed):
    """``ISAACGYM_STANDIN_TIMES`` (isaacgym/timing.py, for benchmarks): every call into the
    stand-in's Gym counted, with its time (the methods' seconds sum to the total), a line a
    call here; unset, the stand-in's methods are its own. A nested call: the test below."""
    urdf, times = tmp_path / "r.urdf", tmp_path / "times.jsonl"
    urdf.write_text(URDF)
    env = {"PYTHONPATH": str(STANDIN), "PATH": "/usr/bin:/bin"}
    if timed:
        env.update(ISAACGYM_STANDIN_TIMES=str(times), ISAACGYM_STANDIN_TIMES_EVERY_S="0")
    proc = subprocess.run([sys.executable, "-c", TIMED, str(urdf)], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["wrapped"] is timed
    if not timed:
        assert not times.exists()
        return
    lines = [json.loads(line) for line in times.read_text().splitlines()]  # one a call
    last = lines[-1]
    assert lines[0]["calls"] == {"create_sim": 1} and len(lines) == sum(last["calls"].values())
    assert last["calls"]["simulate"] == 3 and last["calls"]["fetch_results"] == 3
    assert last["calls"]["load_asset"] == 1 and last["total"] > 0
    assert sum(last["seconds"].values()) == pytest.approx(last["total"], abs=1e-3)


def test_a_call_made_from_within_another_is_timed_once(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("standin_timing",
                                                  str(STANDIN / "isaacgym" / "timing.py"))
    timing = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(timing)
    timing.EVERY_S = 0.0

    class Calls(object):
        def outer(self):
            return self.inner() + 1

        def inner(self):
            return 1

    timing.install(Calls, str(tmp_path / "t.jsonl"))
    assert Calls().outer() == 2 and Calls().inner() == 1
    last = json.loads((tmp_path / "t.jsonl").read_text().splitlines()[-1])
    assert last["calls"] == {"outer": 1, "inner": 1}
