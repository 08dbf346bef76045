"""Stand-in for ``isaacgym.gymapi`` (tests only): the part of Isaac Gym Preview 4's API that
MQE at the pin calls, with the real names, signatures and tensor layouts.

It is not PhysX and never pretends to be. ``simulate`` is a simple deterministic physics:
each DOF's velocity follows its drive (the actuation force in effort mode, a PD toward the
target in position mode) and its position integrates that velocity within the limits; each
actor root integrates its own linear and angular velocity; the actors with collision
shapes move instead in a contact world of the plane (``contact.py``: the robots walk where
their joints command, boxes are pushed, with each actor's net contact force). Nothing falls:
there is no gravity's motion. What MQE reads back (states, contact forces, camera frames) has
Isaac Gym's shapes, dtypes and devices. ``ISAACGYM_STANDIN_TIMES`` times every call
(``timing.py``, for benchmarks).

Assets are read from the URDF that ``load_asset`` is given (``urdf.py``): names, counts and
order of DOFs and rigid bodies, DOF properties as a numpy structured array, one rigid shape
per collision element, with ``AssetOptions`` honoured (fixed-joint collapsing included).

``MQE_DOUBLE_CRASH_PHASE`` (create_sim, terrain, envs, prepare_sim) makes the allocating
call of that phase die by SIGSEGV, as PhysX does when its GPU buffers do not fit.
"""
import importlib
import math
import os
import signal

import numpy as np

from isaacgym import contact, urdf


class _LazyTorch:
    """torch on first use: Isaac Gym's own gymapi.py imports no torch (only gymtorch needs
    it), so importing gymapi alone, as ``mapush doctor``'s probe does, stays as quick here."""

    def __getattr__(self, name):  # type: ignore[no-untyped-def]
        import torch as real

        return getattr(real, name)


torch = _LazyTorch()

# As the real gymapi re-exports its compiled bindings' enums.
_bindings = importlib.import_module("isaacgym._bindings.linux-x86_64.gym_38")
SimType = _bindings.SimType
SIM_PHYSX = _bindings.SIM_PHYSX
SIM_FLEX = _bindings.SIM_FLEX


class _Enum(int):
    """An int with a name, as pybind11's enums print."""

    def __new__(cls, value, name=""):
        obj = int.__new__(cls, value)
        obj._name = name
        return obj

    def __repr__(self):
        return "%s.%s" % (type(self).__name__, self._name or int(self))


def _enum(cls_name, **members):
    cls = type(cls_name, (_Enum,), {})
    for name, value in members.items():
        setattr(cls, name, cls(value, name))
    globals().update({name: getattr(cls, name) for name in members})
    return cls


UpAxis = _enum("UpAxis", UP_AXIS_Y=0, UP_AXIS_Z=1)
DofDriveMode = _enum("DofDriveMode", DOF_MODE_NONE=0, DOF_MODE_POS=1, DOF_MODE_VEL=2,
                     DOF_MODE_EFFORT=3)
DofType = _enum("DofType", DOF_INVALID=-1, DOF_ROTATION=0, DOF_TRANSLATION=1)
IndexDomain = _enum("IndexDomain", DOMAIN_ACTOR=0, DOMAIN_ENV=1, DOMAIN_SIM=2)
ImageType = _enum("ImageType", IMAGE_COLOR=0, IMAGE_DEPTH=1, IMAGE_SEGMENTATION=2,
                  IMAGE_OPTICAL_FLOW=3)
CameraFollowMode = _enum("CameraFollowMode", FOLLOW_POSITION=0, FOLLOW_TRANSFORM=1)
ContactCollection = _enum("ContactCollection", CC_NEVER=0, CC_LAST_SUBSTEP=1,
                          CC_ALL_SUBSTEPS=2)
StateFlags = _enum("StateFlags", STATE_NONE=0, STATE_POS=1, STATE_VEL=2, STATE_ALL=3)
KeyboardInput = _enum("KeyboardInput", KEY_SPACE=32, KEY_ESCAPE=256, KEY_R=82, KEY_V=86,
                      KEY_W=87, KEY_A=65, KEY_S=83, KEY_D=68)
DOF_STATE_DTYPE = np.dtype([("pos", "<f4"), ("vel", "<f4")])
DOF_PROPERTIES_DTYPE = urdf.DOF_PROPERTIES_DTYPE


def _crash_here(phase):
    if os.environ.get("MQE_DOUBLE_CRASH_PHASE") == phase:
        os.kill(os.getpid(), signal.SIGSEGV)


class Vec3(object):
    __slots__ = ("x", "y", "z")

    def __init__(self, x=0.0, y=0.0, z=0.0):
        self.x, self.y, self.z = float(x), float(y), float(z)

    def __add__(self, other):
        return Vec3(self.x + other.x, self.y + other.y, self.z + other.z)

    def __sub__(self, other):
        return Vec3(self.x - other.x, self.y - other.y, self.z - other.z)

    def __mul__(self, s):
        return Vec3(self.x * s, self.y * s, self.z * s)

    __rmul__ = __mul__

    def dot(self, other):
        return self.x * other.x + self.y * other.y + self.z * other.z

    def cross(self, other):
        return Vec3(self.y * other.z - self.z * other.y, self.z * other.x - self.x * other.z,
                    self.x * other.y - self.y * other.x)

    def length(self):
        return math.sqrt(self.dot(self))

    def normalize(self):
        n = self.length() or 1.0
        return Vec3(self.x / n, self.y / n, self.z / n)

    def __repr__(self):
        return "Vec3(%g, %g, %g)" % (self.x, self.y, self.z)


class Quat(object):
    __slots__ = ("x", "y", "z", "w")

    def __init__(self, x=0.0, y=0.0, z=0.0, w=1.0):
        self.x, self.y, self.z, self.w = float(x), float(y), float(z), float(w)

    @staticmethod
    def from_euler_zyx(x, y, z):
        """Roll x, pitch y, yaw z, applied about z, then y, then x (q = qz qy qx)."""
        cr, sr = math.cos(x / 2), math.sin(x / 2)
        cp, sp = math.cos(y / 2), math.sin(y / 2)
        cy, sy = math.cos(z / 2), math.sin(z / 2)
        return Quat(sr * cp * cy - cr * sp * sy, cr * sp * cy + sr * cp * sy,
                    cr * cp * sy - sr * sp * cy, cr * cp * cy + sr * sp * sy)

    @staticmethod
    def from_axis_angle(axis, angle):
        a = axis.normalize()
        s = math.sin(angle / 2)
        return Quat(a.x * s, a.y * s, a.z * s, math.cos(angle / 2))

    def __mul__(self, o):
        return Quat(self.w * o.x + self.x * o.w + self.y * o.z - self.z * o.y,
                    self.w * o.y - self.x * o.z + self.y * o.w + self.z * o.x,
                    self.w * o.z + self.x * o.y - self.y * o.x + self.z * o.w,
                    self.w * o.w - self.x * o.x - self.y * o.y - self.z * o.z)

    def rotate(self, v):
        u = Vec3(self.x, self.y, self.z)
        uv = u.cross(v)
        return v + (uv * self.w + u.cross(uv)) * 2.0

    def inverse(self):
        return Quat(-self.x, -self.y, -self.z, self.w)

    def __repr__(self):
        return "Quat(%g, %g, %g, %g)" % (self.x, self.y, self.z, self.w)


class Transform(object):
    def __init__(self, p=None, r=None):
        self.p = p if p is not None else Vec3()
        self.r = r if r is not None else Quat()

    def transform_point(self, point):
        return self.r.rotate(point) + self.p

    def transform_vector(self, vector):
        return self.r.rotate(vector)

    def inverse(self):
        r = self.r.inverse()
        return Transform(r.rotate(self.p) * -1.0, r)

    def __mul__(self, other):
        return Transform(self.transform_point(other.p), self.r * other.r)


class Mat33(object):
    def __init__(self, x=None, y=None, z=None):
        self.x = x or Vec3(1, 0, 0)
        self.y = y or Vec3(0, 1, 0)
        self.z = z or Vec3(0, 0, 1)


class _Params(object):
    """A parameter class: attributes with Isaac Gym's defaults; unknown names refused, as
    a pybind11 class refuses them."""
    _defaults = {}

    def __init__(self, **kw):
        for name, value in self._defaults.items():
            object.__setattr__(self, name, value() if callable(value) else value)
        for name, value in kw.items():
            setattr(self, name, value)

    def __setattr__(self, name, value):
        if name not in self._defaults:
            raise AttributeError("'%s' object has no attribute '%s'" % (type(self).__name__,
                                                                        name))
        object.__setattr__(self, name, value)


def _params(name, **defaults):
    return type(name, (_Params,), {"_defaults": defaults})


PhysXParams = _params(
    "PhysXParams", num_threads=4, solver_type=1, num_position_iterations=4,
    num_velocity_iterations=1, contact_offset=0.02, rest_offset=0.001,
    bounce_threshold_velocity=0.2, max_depenetration_velocity=100.0,
    default_buffer_size_multiplier=2.0, max_gpu_contact_pairs=1024 * 1024, num_subscenes=0,
    contact_collection=lambda: ContactCollection.CC_ALL_SUBSTEPS, use_gpu=False,
    always_use_articulations=False, friction_offset_threshold=0.04,
    friction_correlation_distance=0.025)
FlexParams = _params(
    "FlexParams", solver_type=5, num_outer_iterations=4, num_inner_iterations=15,
    relaxation=0.75, warm_start=0.4, contact_regularization=1e-7, shape_collision_margin=0.0,
    shape_collision_distance=0.0, max_rigid_contacts=1048576, max_soft_contacts=1048576,
    dynamic_friction=1.0, static_friction=0.0, particle_friction=0.0,
    geometric_stiffness=1.0, deterministic_mode=False, friction_mode=2, return_contacts=False)
SimParams = _params(
    "SimParams", dt=1.0 / 60.0, substeps=2, up_axis=lambda: UpAxis.UP_AXIS_Y,
    gravity=lambda: Vec3(0.0, -9.8, 0.0), num_client_threads=0, use_gpu_pipeline=False,
    enable_actor_creation_warning=False, stress_visualization=False,
    stress_visualization_min=0.0, stress_visualization_max=1e5,
    physx=PhysXParams, flex=FlexParams)
PlaneParams = _params("PlaneParams", normal=lambda: Vec3(0, 0, 1), distance=0.0,
                      static_friction=1.0, dynamic_friction=1.0, restitution=0.0,
                      segmentation_id=0)
HeightFieldParams = _params(
    "HeightFieldParams", column_scale=1.0, row_scale=1.0, vertical_scale=1.0, nbRows=0,
    nbColumns=0, transform=Transform, static_friction=1.0, dynamic_friction=1.0,
    restitution=0.0, segmentation_id=0)
TriangleMeshParams = _params(
    "TriangleMeshParams", nb_vertices=0, nb_triangles=0, transform=Transform,
    static_friction=1.0, dynamic_friction=1.0, restitution=0.0, segmentation_id=0)
AssetOptions = _params(
    "AssetOptions", angular_damping=0.5, armature=0.0, collapse_fixed_joints=False,
    convex_decomposition_from_submeshes=False, default_dof_drive_mode=0, density=1000.0,
    disable_gravity=False, fix_base_link=False, flip_visual_attachments=False,
    linear_damping=0.0, max_angular_velocity=64.0, max_linear_velocity=1000.0,
    mesh_normal_mode=0, min_particle_mass=1e-12, override_com=False, override_inertia=False,
    replace_cylinder_with_capsule=False, slices_per_cylinder=20, tendon_limit_stiffness=1.0,
    thickness=0.02, use_mesh_materials=False, use_physx_armature=True,
    vhacd_enabled=False, enable_gyroscopic_forces=True)
CameraProperties = _params(
    "CameraProperties", width=1920, height=1080, horizontal_fov=90.0, near_plane=0.1,
    far_plane=2e6, supersampling_horizontal=1, supersampling_vertical=1,
    enable_tensors=False, use_collision_geometry=False)
RigidShapeProperties = _params(
    "RigidShapeProperties", friction=1.0, rolling_friction=0.0, torsion_friction=0.0,
    restitution=0.0, compliance=0.0, thickness=0.0, contact_offset=0.0, rest_offset=0.0,
    filter=0)
RigidBodyProperties = _params(
    "RigidBodyProperties", mass=1.0, invMass=1.0, com=Vec3, inertia=Mat33, invInertia=Mat33,
    flags=0)


class Tensor(object):
    """What ``acquire_*_tensor`` and ``gymtorch.unwrap_tensor`` hand over: a descriptor of a
    torch tensor (``gymtorch.wrap_tensor`` returns the tensor itself, sharing its memory)."""

    def __init__(self, data):
        self.data = data
        self.device = data.device
        self.shape = tuple(data.shape)


# Index of each channel in an actor root state / rigid body state row (Isaac Gym's layout).
_POS, _ROT, _LINVEL, _ANGVEL = slice(0, 3), slice(3, 7), slice(7, 10), slice(10, 13)
# A DOF's velocity in effort mode: the actuation force over this drag (N*m*s/rad).
DOF_DRAG = 1.0
# How a Go1 walks here (not PhysX's contact dynamics): its base moves at the velocity its
# joints encode, in the base's frame, from the differences of joints whose default angles
# are equal (go1_config.py's default_joint_angles), 1 m/s or 1 rad/s per rad:
# x = FL_calf - FR_calf, y = RL_calf - RR_calf, yaw rate = FL_thigh - FR_thigh. The stand-in
# locomotion body (prepare_tree.py) sets those joints' targets from the command it is given,
# so a commanded velocity becomes the base's, as walk-these-ways' trained body would make it.
WALK_JOINTS = ("FL_calf_joint", "FR_calf_joint", "RL_calf_joint", "RR_calf_joint",
               "FL_thigh_joint", "FR_thigh_joint")
# A Go1 whose joints were set (MQE's reset draws them at 0.7-1.3 x their default angles,
# go1_config.py:241) stands before it walks: its base takes no command for this long (s),
# three time constants of its joints' tracking (about 0.085 s, the actuator net's), by which
# the drawn angles' own encoded velocity has decayed to 5%: zero command, no motion.
STANCE_S = 0.25


def _walkers(actors, device):
    """(actor rows, (6, walkers) DOF indices of WALK_JOINTS) of the actors that have them."""
    rows, cols = [], []
    for row, actor in enumerate(actors):
        names = list(actor.asset.dof_names)
        if all(name in names for name in WALK_JOINTS):
            rows.append(row)
            cols.append([actor.first_dof + names.index(name) for name in WALK_JOINTS])
    if not rows:
        return None
    return (torch.tensor(rows, device=device, dtype=torch.long),
            torch.tensor(cols, device=device, dtype=torch.long).t().contiguous())


class _Actor(object):
    def __init__(self, env, asset, pose, name, group, filter_, segmentation):
        self.env, self.asset, self.name = env, asset, name
        self.pose = pose
        self.collision_group, self.filter, self.segmentation = group, filter_, segmentation
        self.dof_props = asset.dof_properties.copy()
        self.body_props = asset.rigid_body_properties()
        self.shape_props = asset.rigid_shape_properties()
        self.index = None  # in the sim, set by create_actor
        self.first_dof = self.first_body = None


class _Env(object):
    def __init__(self, sim, index, lower, upper):
        self.sim, self.index, self.lower, self.upper = sim, index, lower, upper
        self.actors = []
        self.cameras = []

    def body_offset(self, handle):
        return sum(a.asset.num_bodies for a in self.actors[:handle])


class _Camera(object):
    def __init__(self, env, props):
        self.env, self.props = env, props
        self.position = Vec3(0.0, -1.0, 1.0)
        self.target = Vec3(0.0, 0.0, 0.0)
        self.body = None


class _Sim(object):
    def __init__(self, compute_device, graphics_device, engine, params):
        self.params = params
        self.engine = engine
        self.graphics_device = graphics_device
        self.device = torch.device("cuda:%d" % compute_device if params.use_gpu_pipeline
                                   else "cpu")
        self.envs = []
        self.actors = []
        self.assets = []
        self.terrain = []
        self.ground_friction = 1.0  # no terrain: PhysX's default material
        self.prepared = False
        self.steps = 0

    def count(self, what):
        return sum(getattr(a.asset, what) for a in self.actors)


class Gym(object):
    """The gym object of ``acquire_gym()``."""

    # --- sim --------------------------------------------------------------------------
    def create_sim(self, compute_device=0, graphics_device=0, type=SIM_PHYSX, params=None):
        _crash_here("create_sim")
        return _Sim(compute_device, graphics_device, type, params or SimParams())

    def add_ground(self, sim, params):
        _crash_here("terrain")
        sim.terrain.append(("plane", params))
        sim.ground_friction = params.static_friction

    def add_heightfield(self, sim, heightsamples, params):
        _crash_here("terrain")
        sim.terrain.append(("heightfield", np.asarray(heightsamples).shape))
        sim.ground_friction = params.static_friction

    def add_triangle_mesh(self, sim, vertices, triangles, params):
        _crash_here("terrain")
        sim.terrain.append(("trimesh", (len(vertices), len(triangles))))
        sim.ground_friction = params.static_friction

    def prepare_sim(self, sim):
        _crash_here("prepare_sim")
        dev = sim.device
        actors = sim.actors
        num_dofs, num_bodies = sim.count("num_dofs"), sim.count("num_bodies")
        root = torch.zeros(len(actors), 13, device=dev)
        for row, actor in zip(root, actors):
            p, r = actor.pose.p, actor.pose.r
            row[:7] = torch.tensor([p.x, p.y, p.z, r.x, r.y, r.z, r.w])
        sim.root = root  # the physics' own state; tensors see it at each refresh
        sim.dof = torch.zeros(num_dofs, 2, device=dev)
        sim.actuation = torch.zeros(num_dofs, device=dev)
        sim.dof_target = torch.zeros(num_dofs, device=dev)
        props = np.concatenate([a.dof_props for a in actors]) if num_dofs else \
            np.zeros(0, DOF_PROPERTIES_DTYPE)

        def column(values):
            return torch.tensor(np.array(values, dtype=np.float64), device=dev,
                                dtype=torch.float)

        sim.dof_lower = column(np.where(props["hasLimits"], props["lower"], -np.inf))
        sim.dof_upper = column(np.where(props["hasLimits"], props["upper"], np.inf))
        # a velocity limit of 0 is no limit
        sim.dof_vmax = column(np.where(props["velocity"] > 0, props["velocity"], np.inf))
        sim.dof_mode = column(props["driveMode"]).long()
        sim.dof_kp = column(props["stiffness"])
        sim.dof_kd = column(props["damping"])
        sim.dof[:, 0] = torch.clamp(sim.dof[:, 0], sim.dof_lower, sim.dof_upper)
        sim.fixed = torch.tensor([a.asset.options.fix_base_link for a in actors],
                                 device=dev, dtype=torch.bool)
        sim.walk = _walkers(actors, dev)
        walker = torch.full((len(actors) + 1,), -1, dtype=torch.long)
        if sim.walk is not None:
            walker[sim.walk[0].cpu()] = torch.arange(len(sim.walk[0]))
            sim.stance = torch.zeros(len(sim.walk[0]) + 1, device=dev)  # the last: a sink
        sim.walker = walker.to(dev)  # each actor's walker index, -1 for none
        walk_rows = sim.walk[0].tolist() if sim.walk is not None else []
        sim.plane = contact.Plane(actors, walk_rows, abs(float(sim.params.gravity.z)),
                                  sim.ground_friction, float(sim.params.dt)) if actors else None
        plane_rows = sim.plane.rows if sim.plane else []
        in_plane = torch.zeros(len(actors), dtype=torch.bool)
        in_plane[plane_rows] = True
        sim.in_plane = in_plane.to(dev)
        sim.root_body = torch.tensor([a.first_body for a in actors], dtype=torch.long,
                                     device=dev)
        sim.contact = torch.zeros(num_bodies, 3, device=dev)
        sim.contact_stale, sim.pinned = False, None  # simulate sets it; the copies' buffers
        sim.plane_bodies = sim.root_body[plane_rows]
        sim.body_actor = torch.tensor(
            [i for i, a in enumerate(actors) for _ in range(a.asset.num_bodies)],
            device=dev, dtype=torch.long)
        sim.views = {
            "root": torch.zeros_like(root), "dof": torch.zeros_like(sim.dof),
            "body": torch.zeros(num_bodies, 13, device=dev),
            "contact": torch.zeros(num_bodies, 3, device=dev),
        }
        sim.prepared = True
        return True

    def simulate(self, sim):
        p = sim.params
        dt = float(p.dt)
        dof = sim.dof
        force = torch.where(sim.dof_mode == int(DOF_MODE_EFFORT), sim.actuation,
                            torch.where(sim.dof_mode == int(DOF_MODE_POS),
                                        sim.dof_kp * (sim.dof_target - dof[:, 0])
                                        - sim.dof_kd * dof[:, 1],
                                        torch.zeros_like(sim.actuation)))
        vel = torch.max(torch.min(force / DOF_DRAG, sim.dof_vmax), -sim.dof_vmax)
        pos = dof[:, 0] + vel * dt
        clamped = torch.max(torch.min(pos, sim.dof_upper), sim.dof_lower)
        dof[:, 0] = clamped
        dof[:, 1] = torch.where(clamped == pos, vel, torch.zeros_like(vel))
        root = sim.root
        walk = None
        if sim.walk is not None:  # each Go1 commanded at the velocity its joints encode
            rows, cols = sim.walk
            joint = dof[:, 0][cols]
            vx, vy, wz = joint[0] - joint[1], joint[2] - joint[3], joint[4] - joint[5]
            qx, qy, qz, qw = root[rows][:, _ROT].unbind(-1)
            yaw = torch.atan2(2 * (qw * qz + qx * qy), 1 - 2 * (qy * qy + qz * qz))
            cos, sin = torch.cos(yaw), torch.sin(yaw)
            standing = (sim.stance[:-1] > 0).unsqueeze(-1)
            walk = torch.stack([vx * cos - vy * sin, vx * sin + vy * cos, wz], -1)
            walk = torch.where(standing, torch.zeros_like(walk), walk)
            sim.stance -= dt
        if sim.plane is not None:
            # the actors with shapes move in the plane's contact world (contact.py), on the
            # host: the root states and the walkers' commands down in one copy, the root states
            # up in one (pinned and non-blocking on a GPU); the net contact forces are read
            # only when MQE refreshes them (refresh_net_contact_force_tensor)
            packed = root.detach().reshape(-1) if walk is None else \
                torch.cat([root.detach().reshape(-1), walk.detach().reshape(-1)])
            if packed.is_cuda:
                if sim.pinned is None:
                    sim.pinned = (torch.empty(packed.shape, pin_memory=True),
                                  torch.empty(root.shape, pin_memory=True))
                sim.pinned[0].copy_(packed, non_blocking=True)
                torch.cuda.current_stream(packed.device).synchronize()
                packed = sim.pinned[0]
            host = packed.numpy().astype(np.float64)
            state = host[:root.numel()].reshape(root.shape)
            sim.plane.step(state, host[root.numel():].reshape(-1, 3) if walk is not None
                           else None, forces=False)
            if root.is_cuda:  # the previous upload is done: this step's download waited for it
                sim.pinned[1].copy_(torch.from_numpy(state))
                root.copy_(sim.pinned[1], non_blocking=True)
            else:
                root.copy_(torch.from_numpy(state))
            sim.contact_stale = True
        free = (~sim.fixed & ~sim.in_plane).float().unsqueeze(-1)
        root[:, _POS] += free * root[:, _LINVEL] * dt
        w = root[:, _ANGVEL] * free
        q = root[:, _ROT]
        # dq/dt = 0.5 * (w, 0) * q, then renormalised
        wx, wy, wz = w.unbind(-1)
        qx, qy, qz, qw = q.unbind(-1)
        dq = torch.stack([wx * qw + wy * qz - wz * qy, wy * qw - wx * qz + wz * qx,
                          wz * qw + wx * qy - wy * qx, -wx * qx - wy * qy - wz * qz], -1)
        q = q + 0.5 * dt * dq
        root[:, _ROT] = q / q.norm(dim=-1, keepdim=True)
        sim.steps += 1

    def fetch_results(self, sim, wait=True):
        return True

    def step_graphics(self, sim):
        pass

    def sync_frame_time(self, sim):
        pass

    def get_sim_time(self, sim):
        return sim.steps * float(sim.params.dt)

    def destroy_sim(self, sim):
        sim.envs = []

    # --- assets -----------------------------------------------------------------------
    def load_asset(self, sim, rootpath, filename, options=None):
        asset = urdf.Asset(os.path.join(rootpath, filename), options or AssetOptions(),
                           RigidShapeProperties, RigidBodyProperties, Vec3, Mat33)
        sim.assets.append(asset)
        return asset

    def create_box(self, sim, width, height, depth, options=None):
        return urdf.Asset.box(width, height, depth, options or AssetOptions(),
                              RigidShapeProperties, RigidBodyProperties, Vec3, Mat33)

    def get_asset_dof_names(self, asset):
        return list(asset.dof_names)

    def get_asset_dof_count(self, asset):
        return asset.num_dofs

    def get_asset_rigid_body_names(self, asset):
        return list(asset.body_names)

    def get_asset_rigid_body_count(self, asset):
        return asset.num_bodies

    def get_asset_rigid_shape_count(self, asset):
        return asset.num_shapes

    def get_asset_dof_properties(self, asset):
        return asset.dof_properties.copy()

    def get_asset_rigid_shape_properties(self, asset):
        return asset.rigid_shape_properties()

    def set_asset_rigid_shape_properties(self, asset, props):
        return asset.set_rigid_shape_properties(props)

    # --- envs and actors ----------------------------------------------------------------
    def create_env(self, sim, lower, upper, num_per_row):
        _crash_here("envs")
        if sim.prepared:
            raise RuntimeError("create_env after prepare_sim")
        env = _Env(sim, len(sim.envs), lower, upper)
        sim.envs.append(env)
        return env

    def create_actor(self, env, asset, pose, name=None, group=-1, filter=-1,
                     segmentationId=0):
        sim = env.sim
        actor = _Actor(env, asset, Transform(Vec3(pose.p.x, pose.p.y, pose.p.z),
                                             Quat(pose.r.x, pose.r.y, pose.r.z, pose.r.w)),
                       name, group, filter, segmentationId)
        actor.index = len(sim.actors)
        actor.first_dof = sim.count("num_dofs")
        actor.first_body = sim.count("num_bodies")
        sim.actors.append(actor)
        env.actors.append(actor)
        return len(env.actors) - 1

    def get_actor_count(self, env):
        return len(env.actors)

    def get_sim_actor_count(self, sim):
        return len(sim.actors)

    def get_env_count(self, sim):
        return len(sim.envs)

    def get_actor_index(self, env, actor_handle, domain):
        if int(domain) == int(DOMAIN_SIM):
            return env.actors[actor_handle].index
        return actor_handle

    def get_actor_name(self, env, actor_handle):
        return env.actors[actor_handle].name

    def get_actor_dof_count(self, env, actor_handle):
        return env.actors[actor_handle].asset.num_dofs

    def get_actor_rigid_body_count(self, env, actor_handle):
        return env.actors[actor_handle].asset.num_bodies

    def get_actor_rigid_body_names(self, env, actor_handle):
        return list(env.actors[actor_handle].asset.body_names)

    def get_actor_dof_names(self, env, actor_handle):
        return list(env.actors[actor_handle].asset.dof_names)

    def find_actor_rigid_body_handle(self, env, actor_handle, name):
        """The body's handle in the env (-1 when the actor has none of that name)."""
        names = env.actors[actor_handle].asset.body_names
        if name not in names:
            return -1
        return env.body_offset(actor_handle) + names.index(name)

    def find_actor_dof_handle(self, env, actor_handle, name):
        names = env.actors[actor_handle].asset.dof_names
        return names.index(name) if name in names else -1

    def get_actor_dof_properties(self, env, actor_handle):
        return env.actors[actor_handle].dof_props.copy()

    def set_actor_dof_properties(self, env, actor_handle, props):
        actor = env.actors[actor_handle]
        props = np.asarray(props)
        if props.dtype != DOF_PROPERTIES_DTYPE or props.shape != actor.dof_props.shape:
            raise TypeError("set_actor_dof_properties: expected a %s array of %d DOFs, got %s %s"
                            % (DOF_PROPERTIES_DTYPE, actor.asset.num_dofs, props.dtype,
                               props.shape))
        actor.dof_props = props.copy()
        return True

    def get_actor_rigid_body_properties(self, env, actor_handle):
        return list(env.actors[actor_handle].body_props)

    def set_actor_rigid_body_properties(self, env, actor_handle, props, recomputeInertia=False):
        actor = env.actors[actor_handle]
        if len(props) != actor.asset.num_bodies:
            raise ValueError("set_actor_rigid_body_properties: %d properties for %d bodies"
                             % (len(props), actor.asset.num_bodies))
        actor.body_props = list(props)
        return True

    def get_actor_rigid_shape_properties(self, env, actor_handle):
        return list(env.actors[actor_handle].shape_props)

    def set_actor_rigid_shape_properties(self, env, actor_handle, props):
        actor = env.actors[actor_handle]
        if len(props) != actor.asset.num_shapes:
            raise ValueError("set_actor_rigid_shape_properties: %d properties for %d shapes"
                             % (len(props), actor.asset.num_shapes))
        actor.shape_props = list(props)
        return True

    def set_rigid_body_color(self, env, actor_handle, rigid_body_index, mesh_type, color):
        pass

    def set_rigid_body_segmentation_id(self, env, actor_handle, rigid_body_index, id):
        pass

    # --- tensors ----------------------------------------------------------------------
    def _view(self, sim, name):
        if not sim.prepared:
            raise RuntimeError("acquire tensors after prepare_sim")
        return Tensor(sim.views[name])

    def acquire_actor_root_state_tensor(self, sim):
        return self._view(sim, "root")

    def acquire_dof_state_tensor(self, sim):
        return self._view(sim, "dof")

    def acquire_rigid_body_state_tensor(self, sim):
        return self._view(sim, "body")

    def acquire_net_contact_force_tensor(self, sim):
        return self._view(sim, "contact")

    def refresh_actor_root_state_tensor(self, sim):
        sim.views["root"].copy_(sim.root)
        return True

    def refresh_dof_state_tensor(self, sim):
        sim.views["dof"].copy_(sim.dof)
        return True

    def refresh_rigid_body_state_tensor(self, sim):
        # every body of an actor at its root's pose and velocity (no kinematics here)
        sim.views["body"].copy_(sim.root[sim.body_actor])
        return True

    def refresh_net_contact_force_tensor(self, sim):
        if sim.contact_stale:  # the plane's actors' root bodies, in one copy
            sim.contact.zero_()
            sim.contact[sim.plane_bodies] = torch.from_numpy(sim.plane.forces()).to(
                sim.contact.device, torch.float)
            sim.contact_stale = False
        sim.views["contact"].copy_(sim.contact)
        return True

    def refresh_dof_force_tensor(self, sim):
        return True

    def refresh_force_sensor_tensor(self, sim):
        return True

    def refresh_jacobian_tensors(self, sim):
        return True

    def refresh_mass_matrix_tensors(self, sim):
        return True

    @staticmethod
    def _rows(sim, tensor, width, indices=None, count=None):
        if tensor.data.dtype != torch.float32:  # Isaac Gym's state and force tensors are float32
            raise TypeError("expected a float32 gym tensor, got %s" % tensor.data.dtype)
        data = tensor.data.reshape(-1, width) if width > 1 else tensor.data.reshape(-1)
        if data.device != sim.device:
            raise RuntimeError("tensor on %s, sim on %s" % (data.device, sim.device))
        if indices is None:
            return None, data
        idx = indices.data.reshape(-1)[:count].long()
        if indices.data.dtype != torch.int32:
            raise TypeError("indices must be an int32 tensor, got %s" % indices.data.dtype)
        return idx, data

    def _dof_rows(self, sim, actor_idx):
        rows = [torch.arange(a.first_dof, a.first_dof + a.asset.num_dofs)
                for a in (sim.actors[i] for i in actor_idx.tolist())]
        return torch.cat(rows).to(sim.device) if rows else \
            torch.zeros(0, dtype=torch.long, device=sim.device)

    def set_actor_root_state_tensor(self, sim, tensor):
        _, data = self._rows(sim, tensor, 13)
        sim.root.copy_(data)
        return True

    def set_actor_root_state_tensor_indexed(self, sim, tensor, indices, count):
        idx, data = self._rows(sim, tensor, 13, indices, count)
        sim.root[idx] = data[idx]
        return True

    def set_dof_state_tensor(self, sim, tensor):
        _, data = self._rows(sim, tensor, 2)
        sim.dof.copy_(data)
        self._stand(sim, torch.arange(len(sim.actors), device=sim.device))
        return True

    def set_dof_state_tensor_indexed(self, sim, tensor, indices, count):
        idx, data = self._rows(sim, tensor, 2, indices, count)
        rows = self._dof_rows(sim, idx)
        sim.dof[rows] = data[rows]
        self._stand(sim, idx)
        return True

    @staticmethod
    def _stand(sim, idx):
        """The Go1s among actors ``idx`` whose joints were just set stand for STANCE_S
        (no host sync: the others' rows go to the sink at the end)."""
        if sim.walk is not None:
            walker = sim.walker[idx]
            sim.stance[torch.where(walker >= 0, walker, sim.stance.shape[0] - 1)] = STANCE_S

    def set_dof_actuation_force_tensor(self, sim, tensor):
        _, data = self._rows(sim, tensor, 1)
        sim.actuation.copy_(data.float())
        return True

    def set_dof_actuation_force_tensor_indexed(self, sim, tensor, indices, count):
        idx, data = self._rows(sim, tensor, 1, indices, count)
        rows = self._dof_rows(sim, idx)
        sim.actuation[rows] = data[rows].float()
        return True

    def set_dof_position_target_tensor(self, sim, tensor):
        _, data = self._rows(sim, tensor, 1)
        sim.dof_target.copy_(data.float())
        return True

    def apply_rigid_body_force_tensors(self, sim, forceTensor=None, torqueTensor=None,
                                       space=None):
        return True

    # --- cameras ----------------------------------------------------------------------
    def create_camera_sensor(self, env, props):
        env.cameras.append(_Camera(env, props))
        return len(env.cameras) - 1

    def set_camera_location(self, camera_handle, env, position, target):
        cam = env.cameras[camera_handle]
        cam.position, cam.target = Vec3(position.x, position.y, position.z), \
            Vec3(target.x, target.y, target.z)

    def attach_camera_to_body(self, camera_handle, env, body_handle, transform, follow_mode):
        env.cameras[camera_handle].body = (body_handle, transform, follow_mode)

    def get_camera_transform(self, sim, env, camera_handle):
        cam = env.cameras[camera_handle]
        return Transform(Vec3(cam.position.x, cam.position.y, cam.position.z), Quat())

    def render_all_camera_sensors(self, sim):
        pass

    def start_access_image_tensors(self, sim):
        pass

    def end_access_image_tensors(self, sim):
        pass

    def _frame(self, env, camera_handle, image_type):
        """A top view around the camera's target: each actor of the env a square of its own
        shade. Shapes and dtypes as Isaac Gym's: colour (H, W, 4) uint8, depth and
        segmentation (H, W)."""
        cam = env.cameras[camera_handle]
        h, w = int(cam.props.height), int(cam.props.width)
        if int(image_type) == int(IMAGE_DEPTH):
            return np.full((h, w), -1.0, dtype=np.float32)
        if int(image_type) == int(IMAGE_SEGMENTATION):
            return np.zeros((h, w), dtype=np.int32)
        img = np.full((h, w, 4), 48, dtype=np.uint8)
        img[..., 3] = 255
        sim = env.sim
        if sim.prepared:
            cx, cy = cam.target.x, cam.target.y
            px_per_m = min(h, w) / 6.0
            for k, actor in enumerate(env.actors):
                x, y = sim.root[actor.index, 0:2].tolist()
                col = int(w / 2 + (x - cx) * px_per_m)
                row = int(h / 2 - (y - cy) * px_per_m)
                r0, r1 = max(row - 3, 0), min(row + 4, h)
                c0, c1 = max(col - 3, 0), min(col + 4, w)
                if r0 < r1 and c0 < c1:
                    img[r0:r1, c0:c1, :3] = (80 + 60 * k) % 256, 200 - 40 * (k % 4), 90
        return img

    def get_camera_image(self, sim, env, camera_handle, image_type):
        """As Isaac Gym's: a colour image is (H, W * 4) uint8."""
        img = self._frame(env, camera_handle, image_type)
        return img.reshape(img.shape[0], -1) if img.ndim == 3 else img

    def get_camera_image_gpu_tensor(self, sim, env, camera_handle, image_type):
        return Tensor(torch.from_numpy(self._frame(env, camera_handle, image_type))
                      .to(sim.device))

    # --- viewer and drawing: accepted, nothing is shown -----------------------------------
    def create_viewer(self, sim, props):
        return None

    def subscribe_viewer_keyboard_event(self, viewer, key, action):
        pass

    def query_viewer_has_closed(self, viewer):
        return False

    def query_viewer_action_events(self, viewer):
        return []

    def poll_viewer_events(self, viewer):
        pass

    def draw_viewer(self, viewer, sim, render_collision=True):
        pass

    def viewer_camera_look_at(self, viewer, env, pos, target):
        pass

    def add_lines(self, viewer, env, num_lines, vertices, colors):
        pass

    def clear_lines(self, viewer):
        pass

    def destroy_viewer(self, viewer):
        pass


if os.environ.get("ISAACGYM_STANDIN_TIMES"):  # benchmarks: the stand-in's own time (timing.py)
    from isaacgym import timing

    timing.install(Gym, os.environ["ISAACGYM_STANDIN_TIMES"])


def acquire_gym():
    return Gym()
