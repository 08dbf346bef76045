"""The stand-in's contact in the plane (tests only; not a module of the real Isaac Gym).

Not PhysX. Every actor with collision shapes is a rigid body of MuJoCo (a well-kept physics
library from PyPI) that moves in the plane: x, y and yaw, nothing else. Each keeps its height,
and its roll and pitch are zero. What it models, and what it leaves out:

- **Shapes:** an object's or obstacle's box, cylinder and sphere collision elements (its
  URDF's, ``urdf.Asset.footprint``), each a vertical prism of its footprint, so that any two
  shapes of the plane meet whatever their heights. A Go1 (an actor with ``WALK_JOINTS``) is a
  box of its standing footprint, ``GO1_FOOTPRINT``; its legs are not modelled.
- **Who touches whom:** Isaac Gym's rule, ``create_actor``'s group and filter: two actors'
  shapes collide when they are in the same env, their groups are equal (or either is -1) and
  their filters share no bit. A fixed-base actor (``fix_base_link``) does not move.
- **A Go1 walks, with the force its feet can take from the ground:** the ground's force on
  its base drives it toward the velocity its joints encode (``gymapi.WALK_JOINTS``), as a
  first-order servo of time constant ``SERVO_S``, and that force is Coulomb friction: at most
  mu * m * g in the plane (mu the mean of the terrain's ``static_friction`` and the robot's
  shape friction, m its URDF mass, g the sim's gravity), and that force times the
  footprint's radius of gyration in yaw. So a Go1 pushes with at most mu * m * g (the mid
  task's: (0.1 + 1.0) / 2 x 16.3 kg x 9.81, about 88 N), it is stopped by what it cannot
  move, and it is pushed away by more than that: the same bound is its ground friction.
- **Friction:** between two shapes, Coulomb friction of the mean of their shapes'
  ``friction`` (PhysX's default combine mode); on the ground, Coulomb friction of the mean of
  the terrain's ``static_friction`` and the object's shape friction, under the sim's gravity
  and the actor's mass (the yaw's: that force times the footprint's radius of gyration).
- **Net contact forces:** each contact's force (world frame) on the root body of each actor
  it touches; the other rigid bodies of an actor get none.
- Not modelled: gravity's own motion (nothing falls or tips), the terrain's walls and
  heightfield, the legs' contacts, restitution.
"""
import numpy as np

import mujoco

GO1_FOOTPRINT = (0.645, 0.28)  # Unitree Go1's standing length and width (m), its spec sheet
HALF_HEIGHT = 1.0  # every shape a prism this tall each side of z = 0
# The time constant of a Go1's base velocity servo (s): 4 sim steps of MQE's 0.005 s, so the
# explicit drive is stable (dt / SERVO_S = 0.25) and small beside the tracking lag of the
# joints that encode the command (about 0.085 s, the actuator net's: tests/standin/README.md)
SERVO_S = 0.02


def _collide(a, b):
    """Isaac Gym's rule for two actors of one env (create_actor's group and filter)."""
    group = a.collision_group == b.collision_group or -1 in (a.collision_group,
                                                           b.collision_group)
    return group and (int(a.filter) & int(b.filter)) == 0


def _footprint(actor, walker):
    if walker:
        return [("box", [GO1_FOOTPRINT[0], GO1_FOOTPRINT[1], 0.0], 0.0, 0.0, 0.0)]
    return actor.asset.footprint


def _area(kind, size):
    return size[0] * size[1] if kind == "box" else np.pi * size * size


def _geom_xml(name, kind, size, x, y, yaw, mass):
    if kind == "box":
        kind, dims = "box", "%g %g %g" % (size[0] / 2, size[1] / 2, HALF_HEIGHT)
    else:  # a cylinder's or a sphere's footprint is its disc
        kind, dims = "cylinder", "%g %g" % (size, HALF_HEIGHT)
    return ('<geom name="%s" type="%s" size="%s" pos="%g %g 0" euler="0 0 %g" mass="%g" '
            'contype="0" conaffinity="0"/>' % (name, kind, dims, x, y, yaw, mass))


class Plane(object):
    """One MuJoCo model of every env's actors that have shapes, stepped once per simulate."""

    def __init__(self, actors, walker_rows, gravity, ground_friction, dt):
        walkers = set(walker_rows)
        bodies, pairs = [], []
        self.rows, self.free, self.walk, geoms = [], [], [], {}
        self.bound, self.inertia = [], []
        for row, actor in enumerate(actors):
            shapes = _footprint(actor, row in walkers)
            if not shapes:
                continue
            fixed = bool(actor.asset.options.fix_base_link)
            mass = actor.asset.mass
            area = sum(_area(kind, size) for kind, size, _, _, _ in shapes)
            name = "a%d" % row
            geoms[row] = ["%s_%d" % (name, i) for i in range(len(shapes))]
            xml = "".join(_geom_xml(g, kind, size, x, y, yaw, mass * _area(kind, size) / area)
                          for g, (kind, size, x, y, yaw) in zip(geoms[row], shapes))
            if fixed:
                bodies.append('<body name="%s" mocap="true">%s</body>' % (name, xml))
            else:
                slip = 0.0
                if row not in walkers:
                    mu = 0.5 * (float(ground_friction) + actor.shape_props[0].friction)
                    slip = mu * mass * gravity
                    gyration = np.sqrt(sum(
                        _area(k, s) * ((s[0] ** 2 + s[1] ** 2) / 12 + x * x + y * y
                                       if k == "box" else s * s / 2 + x * x + y * y)
                        for k, s, x, y, _ in shapes) / area)
                joints = "".join(
                    '<joint name="%s_%s" type="%s" axis="%s" frictionloss="%g"/>'
                    % (name, axis, "hinge" if axis == "r" else "slide",
                       {"x": "1 0 0", "y": "0 1 0", "r": "0 0 1"}[axis],
                       slip * (gyration if axis == "r" and slip else 1.0))
                    for axis in "xyr")
                bodies.append('<body name="%s">%s%s</body>' % (name, joints, xml))
                if row in walkers:
                    self.walk.append(row)
            if not fixed:
                self.free.append(row)
            if row in walkers:  # bound of the drive: mu * m * g, and its torque in yaw
                mu = 0.5 * (float(ground_friction) + actor.shape_props[0].friction)
                radius = np.sqrt((GO1_FOOTPRINT[0] ** 2 + GO1_FOOTPRINT[1] ** 2) / 12)
                self.bound.append([mu * mass * gravity, mu * mass * gravity * radius])
                self.inertia.append([mass, mass * radius * radius])
            self.rows.append(row)
        by_env, free = {}, set(self.free)
        for row in self.rows:  # contact pairs only within an env
            by_env.setdefault(id(actors[row].env), []).append(row)
        for rows in by_env.values():
            for i, a in enumerate(rows):
                for b in rows[i + 1:]:
                    first, second = actors[a], actors[b]
                    if not _collide(first, second) or (a not in free and b not in free):
                        continue
                    mu = 0.5 * (first.shape_props[0].friction + second.shape_props[0].friction)
                    pairs += ['<pair geom1="%s" geom2="%s" condim="3" friction="%g %g"/>'
                              % (g1, g2, mu, mu) for g1 in geoms[a] for g2 in geoms[b]]
        xml = ('<mujoco><option timestep="%g" gravity="0 0 0" integrator="implicitfast"/>'
               '<worldbody>%s</worldbody><contact>%s</contact>'
               '</mujoco>' % (dt, "".join(bodies), "".join(pairs)))
        self.model = mujoco.MjModel.from_xml_string(xml)
        self.data = mujoco.MjData(self.model)
        self.fixed = [row for row in self.rows if row not in free]
        self.bodies = [mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, "a%d" % r)
                       for r in self.rows]
        self.mocap = [self.model.body_mocapid[body]
                      for row, body in zip(self.rows, self.bodies) if row not in free]
        self.walk_dofs = np.array([self.free.index(row) for row in self.walk], dtype=np.int64)
        self.bound = np.array(self.bound).reshape(-1, 2)
        self.inertia = np.array(self.inertia).reshape(-1, 2)

    def step(self, root, walk_velocity, forces=True):
        """Steps the plane from ``root`` (actors x 13, numpy, Isaac Gym's layout; rows of the
        plane's free actors are updated in place) with the walkers' commanded world velocity
        (``self.walk`` order, x 3: vx, vy, yaw rate). Returns the net contact force (world
        frame) on each of ``self.rows``, in that order, as an array (rows x 3): ``forces``
        False returns None, and :meth:`forces` gives them later (until the next step)."""
        m, d = self.model, self.data
        state = root[self.free]
        x, y, z, w = state[:, 3], state[:, 4], state[:, 5], state[:, 6]
        yaw = np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
        d.qpos[:] = np.stack([state[:, 0], state[:, 1], yaw], -1).reshape(-1)
        d.qvel[:] = np.stack([state[:, 7], state[:, 8], state[:, 12]], -1).reshape(-1)
        if self.fixed:
            fixed = root[self.fixed]
            d.mocap_pos[self.mocap] = fixed[:, 0:3] * np.array([1.0, 1.0, 0.0])
            d.mocap_quat[self.mocap] = fixed[:, [6, 3, 4, 5]]
        d.qfrc_applied[:] = 0.0
        if self.walk:
            d.qfrc_applied.reshape(-1, 3)[self.walk_dofs] = self.drive(
                np.asarray(walk_velocity, dtype=np.float64).reshape(-1, 3),
                d.qvel.reshape(-1, 3)[self.walk_dofs])
        mujoco.mj_step(m, d)
        q, v = d.qpos.reshape(-1, 3), d.qvel.reshape(-1, 3)
        rows = self.free
        root[rows, 0], root[rows, 1] = q[:, 0], q[:, 1]
        root[rows, 3:5] = 0.0
        root[rows, 5], root[rows, 6] = np.sin(q[:, 2] / 2), np.cos(q[:, 2] / 2)
        root[rows, 7], root[rows, 8], root[rows, 12] = v[:, 0], v[:, 1], v[:, 2]
        root[rows, 9:12] = 0.0
        return self.forces() if forces else None

    def forces(self):
        """The last step's net contact force on each body, world frame: the force part of
        MuJoCo's external constraint wrench, which only contacts make here (no equality
        constraints, and the joints' frictionloss acts on DOFs); the sum of mj_contactForce
        over its contacts."""
        mujoco.mj_rnePostConstraint(self.model, self.data)
        return self.data.cfrc_ext[self.bodies, 3:]

    def drive(self, command, velocity):
        """The ground's force on each walker (x, y in the world, yaw torque): a first-order
        servo toward ``command`` (time constant SERVO_S), bounded by Coulomb friction, the
        force's norm in the plane and the torque each by their bound."""
        wanted = self.inertia[:, [0, 0, 1]] * (command - velocity) / SERVO_S
        planar = np.linalg.norm(wanted[:, :2], axis=1)
        wanted[:, :2] *= np.minimum(1.0, self.bound[:, 0] / np.maximum(planar, 1e-12))[:, None]
        wanted[:, 2] = np.clip(wanted[:, 2], -self.bound[:, 1], self.bound[:, 1])
        return wanted
