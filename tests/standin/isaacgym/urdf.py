"""The stand-in's asset reader (tests only; not a module of the real Isaac Gym): a URDF as
Isaac Gym's importer presents it.

- Rigid bodies are the links in depth-first order from the root, siblings in name order
  (Isaac Gym lists Go1's legs FL, FR, RL, RR although its URDF declares FR, FL, RR, RL).
- With ``collapse_fixed_joints``, a link joined to its parent by a fixed joint is merged
  into the parent (its collision shapes and mass with it), unless the joint says
  ``dont_collapse="true"``.
- DOFs are the revolute, continuous and prismatic joints, in the order of their child
  bodies. Their properties are a numpy structured array with Isaac Gym's fields.
- Rigid shapes are the collision elements, body by body.
- ``footprint``: the box, cylinder and sphere collision elements of the root link and of the
  links fixed to it, each as (kind, size, x, y, yaw) in the root's frame (the stand-in's
  contact in the plane, ``contact.py``, reads it).
"""
import os
import xml.etree.ElementTree as ET

import numpy as np

DOF_PROPERTIES_DTYPE = np.dtype([
    ("hasLimits", "?"), ("lower", "<f4"), ("upper", "<f4"), ("driveMode", "<i4"),
    ("velocity", "<f4"), ("effort", "<f4"), ("stiffness", "<f4"), ("damping", "<f4"),
    ("friction", "<f4"), ("armature", "<f4")])
MOVABLE = ("revolute", "continuous", "prismatic")


def _floats(text, default):
    return [float(v) for v in text.split()] if text else list(default)


class _Link(object):
    def __init__(self, name, shapes, mass, com, inertia, geoms=()):
        self.name, self.shapes, self.mass, self.com, self.inertia = \
            name, shapes, mass, com, inertia
        self.geoms = list(geoms)


def _geoms(link):
    """(kind, size, x, y, yaw) of each box, cylinder and sphere collision element: size is
    the box's (x, y, z) or the radius, in the link's frame."""
    out = []
    for collision in link.findall("collision"):
        origin = collision.find("origin")
        x, y, _ = _floats(origin.get("xyz") if origin is not None else None, (0, 0, 0))
        _, _, yaw = _floats(origin.get("rpy") if origin is not None else None, (0, 0, 0))
        geometry = collision.find("geometry")
        for kind in ("box", "cylinder", "sphere"):
            element = geometry.find(kind) if geometry is not None else None
            if element is not None:
                size = _floats(element.get("size"), ()) if kind == "box" else \
                    float(element.get("radius"))
                out.append((kind, size, x, y, yaw))
    return out


def _moved(geoms, xyz, yaw):
    """geoms given in a child's frame, in its parent's (the fixed joint at xyz, turned yaw)."""
    c, s = np.cos(yaw), np.sin(yaw)
    return [(kind, size, xyz[0] + c * x - s * y, xyz[1] + s * x + c * y, g_yaw + yaw)
            for kind, size, x, y, g_yaw in geoms]


class Asset(object):
    """One loaded asset: ``body_names``, ``dof_names``, ``dof_properties`` and the shapes'
    and bodies' property objects (classes handed in by gymapi)."""

    def __init__(self, path, options, shape_cls, body_cls, vec3, mat33, tree=None):
        self.path, self.options = path, options
        self._shape_cls, self._body_cls, self._vec3, self._mat33 = \
            shape_cls, body_cls, vec3, mat33
        if tree is None:
            if not os.path.isfile(path):
                raise RuntimeError("load_asset: no such file: %s" % path)
            tree = ET.parse(path).getroot()
        links, joints = self._read(tree)
        self._build(links, joints)
        self._shape_props = [self._new_shape() for _ in range(self.num_shapes)]

    @classmethod
    def box(cls, width, height, depth, options, *classes):
        robot = ET.fromstring(
            '<robot name="box"><link name="box"><collision><geometry><box size="%g %g %g"/>'
            '</geometry></collision></link></robot>' % (width, height, depth))
        return cls("<box>", options, *classes, tree=robot)

    def _read(self, robot):
        links = {}
        for link in robot.findall("link"):
            inertial = link.find("inertial")
            shapes = len(link.findall("collision"))
            mass, com, inertia = None, [0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 1.0, 0.0, 1.0]
            if inertial is not None:
                m = inertial.find("mass")
                mass = float(m.get("value")) if m is not None else None
                origin = inertial.find("origin")
                com = _floats(origin.get("xyz") if origin is not None else None, com)
                i = inertial.find("inertia")
                if i is not None:
                    inertia = [float(i.get(k, 0.0)) for k in
                               ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")]
            if mass is None:  # from the density and the collision boxes, as the importer
                volume = 0.0
                for box in link.findall("collision/geometry/box"):
                    sx, sy, sz = _floats(box.get("size"), (0, 0, 0))
                    volume += sx * sy * sz
                mass = float(self.options.density) * volume if volume else 1.0
            links[link.get("name")] = _Link(link.get("name"), shapes, mass, com, inertia,
                                            _geoms(link))
        joints = []
        for joint in robot.findall("joint"):
            limit = joint.find("limit")
            dynamics = joint.find("dynamics")
            origin = joint.find("origin")
            joints.append({
                "xyz": _floats(origin.get("xyz") if origin is not None else None, (0, 0, 0)),
                "yaw": _floats(origin.get("rpy") if origin is not None else None,
                               (0, 0, 0))[2],
                "name": joint.get("name"), "type": joint.get("type"),
                "parent": joint.find("parent").get("link"),
                "child": joint.find("child").get("link"),
                "keep": joint.get("dont_collapse", "false").lower() == "true",
                "lower": float(limit.get("lower", 0.0)) if limit is not None else 0.0,
                "upper": float(limit.get("upper", 0.0)) if limit is not None else 0.0,
                "effort": float(limit.get("effort", 0.0)) if limit is not None else 0.0,
                "velocity": float(limit.get("velocity", 0.0)) if limit is not None else 0.0,
                "damping": float(dynamics.get("damping", 0.0)) if dynamics is not None
                else 0.0,
                "friction": float(dynamics.get("friction", 0.0)) if dynamics is not None
                else 0.0,
            })
        return links, joints

    def _build(self, links, joints):
        children = {}
        parents = set()
        for joint in joints:
            children.setdefault(joint["parent"], []).append(joint)
            parents.add(joint["child"])
        roots = [name for name in links if name not in parents]
        if len(roots) != 1:
            raise RuntimeError("load_asset: %s has %d root links" % (self.path, len(roots)))
        collapse = bool(self.options.collapse_fixed_joints)
        bodies = []  # [name, shapes, mass, com, inertia]
        dofs = []

        def visit(link_name, body):
            for joint in sorted(children.get(link_name, []), key=lambda j: j["child"]):
                child = links[joint["child"]]
                if joint["type"] == "fixed" and collapse and not joint["keep"]:
                    body["shapes"] += child.shapes
                    body["mass"] += child.mass
                    visit(child.name, body)
                    continue
                new = {"name": child.name, "shapes": child.shapes, "mass": child.mass,
                       "com": child.com, "inertia": child.inertia}
                bodies.append(new)
                if joint["type"] in MOVABLE:
                    dofs.append(joint)
                visit(child.name, new)

        root = links[roots[0]]
        first = {"name": root.name, "shapes": root.shapes, "mass": root.mass,
                 "com": root.com, "inertia": root.inertia}
        bodies.append(first)
        visit(root.name, first)
        # the root body keeps its place first; visit appended the others in DFS order
        self._bodies = bodies

        def fixed_to(link, xyz, yaw):  # the root's footprint: links fixed to it, any depth
            geoms = _moved(link.geoms, xyz, yaw)
            for joint in children.get(link.name, []):
                if joint["type"] == "fixed":
                    c, s = np.cos(yaw), np.sin(yaw)
                    jx, jy = joint["xyz"][0], joint["xyz"][1]
                    geoms += fixed_to(links[joint["child"]],
                                      (xyz[0] + c * jx - s * jy, xyz[1] + s * jx + c * jy),
                                      yaw + joint["yaw"])
            return geoms

        self.footprint = fixed_to(root, (0.0, 0.0), 0.0)
        self.mass = float(sum(b["mass"] for b in bodies))
        self.body_names = [b["name"] for b in bodies]
        self.num_bodies = len(bodies)
        self.num_shapes = sum(b["shapes"] for b in bodies)
        self.dof_names = [j["name"] for j in dofs]
        self.num_dofs = len(dofs)
        props = np.zeros(self.num_dofs, dtype=DOF_PROPERTIES_DTYPE)
        for i, joint in enumerate(dofs):
            limited = joint["type"] != "continuous" and joint["lower"] < joint["upper"]
            props[i] = (limited, joint["lower"] if limited else 0.0,
                        joint["upper"] if limited else 0.0,
                        int(self.options.default_dof_drive_mode), joint["velocity"],
                        joint["effort"], 0.0, joint["damping"], joint["friction"],
                        float(self.options.armature))
        self.dof_properties = props

    def _new_shape(self):
        shape = self._shape_cls()
        shape.thickness = float(self.options.thickness)
        return shape

    def rigid_shape_properties(self):
        """A copy of each shape's properties, as the real getters return new objects."""
        out = []
        for prop in self._shape_props:
            copy = self._shape_cls()
            for name in copy._defaults:
                setattr(copy, name, getattr(prop, name))
            out.append(copy)
        return out

    def set_rigid_shape_properties(self, props):
        if len(props) != self.num_shapes:
            raise ValueError("set_asset_rigid_shape_properties: %d properties for %d shapes"
                             % (len(props), self.num_shapes))
        self._shape_props = list(props)
        return True

    def rigid_body_properties(self):
        out = []
        for body in self._bodies:
            prop = self._body_cls()
            prop.mass = float(body["mass"])
            prop.invMass = 1.0 / prop.mass if prop.mass > 0 else 0.0
            prop.com = self._vec3(*body["com"])
            ixx, ixy, ixz, iyy, iyz, izz = body["inertia"]
            prop.inertia = self._mat33(self._vec3(ixx, ixy, ixz), self._vec3(ixy, iyy, iyz),
                                       self._vec3(ixz, iyz, izz))
            out.append(prop)
        return out
