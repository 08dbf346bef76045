"""Stand-in for ``isaacgym.gymutil`` (tests only): device strings, sim config parsing,
argument parsing and the viewer's line geometries."""
import argparse

from isaacgym import gymapi


def parse_device_str(device_str):
    """``'cuda:1'`` -> ``('cuda', 1)``; ``'cpu'`` -> ``('cpu', 0)``."""
    if device_str in ("cpu", "cuda"):
        return device_str, 0
    kind, _, index = device_str.partition(":")
    if kind not in ("cpu", "cuda") or not index.isdigit():
        raise ValueError("Invalid device string %r" % device_str)
    return kind, int(index)


def parse_sim_config(cfg, sim_params):
    """Set the sim params named in ``cfg`` (a dict): gravity as a Vec3, up_axis as an
    UpAxis, the ``physx`` and ``flex`` sub-dicts onto their params; names the params do
    not have (e.g. MQE's ``no_camera``) are left out."""
    def apply(target, values):
        for key, value in values.items():
            if key in ("physx", "flex"):
                apply(getattr(target, key), value)
            elif key == "gravity":
                target.gravity = gymapi.Vec3(*value)
            elif key == "up_axis":
                target.up_axis = gymapi.UpAxis(int(value), "UP_AXIS_%s" % "YZ"[int(value)])
            elif key == "contact_collection":
                target.contact_collection = gymapi.ContactCollection(int(value))
            elif key in type(target)._defaults:
                setattr(target, key, value)
    apply(sim_params, cfg)


def parse_arguments(description="Isaac Gym Example", headless=False, no_graphics=False,
                    custom_parameters=()):
    parser = argparse.ArgumentParser(description=description)
    if headless:
        parser.add_argument("--headless", action="store_true")
    if no_graphics:
        parser.add_argument("--nographics", action="store_true")
    parser.add_argument("--sim_device", type=str, default="cuda:0")
    parser.add_argument("--pipeline", type=str, default="gpu")
    parser.add_argument("--graphics_device_id", type=int, default=0)
    engine = parser.add_mutually_exclusive_group()
    engine.add_argument("--flex", action="store_true")
    engine.add_argument("--physx", action="store_true")
    parser.add_argument("--num_threads", type=int, default=0)
    parser.add_argument("--subscenes", type=int, default=0)
    parser.add_argument("--slices", type=int)
    for param in custom_parameters:
        kwargs = {k: v for k, v in param.items() if k != "name"}
        parser.add_argument(param["name"], **kwargs)
    args = parser.parse_args()
    args.sim_device_type, args.compute_device_id = parse_device_str(args.sim_device)
    args.use_gpu_pipeline = args.pipeline in ("gpu", "cuda") and \
        args.sim_device_type == "cuda"
    if args.sim_device_type != "cuda" and args.pipeline in ("gpu", "cuda"):
        args.pipeline = "CPU"
    args.physics_engine = gymapi.SIM_FLEX if args.flex else gymapi.SIM_PHYSX
    args.use_gpu = args.sim_device_type == "cuda"
    if args.slices is None:
        args.slices = args.subscenes
    return args


class LineGeometry(object):
    def vertices(self):
        return []

    def colors(self):
        return []


class AxesGeometry(LineGeometry):
    def __init__(self, scale=1.0, pose=None):
        self.scale, self.pose = scale, pose


class WireframeSphereGeometry(LineGeometry):
    def __init__(self, radius=1.0, num_lats=8, num_lons=8, pose=None, color=None,
                 color2=None):
        self.radius, self.pose, self.color = radius, pose, color


class WireframeBoxGeometry(LineGeometry):
    def __init__(self, xdim=1, ydim=1, zdim=1, pose=None, color=None):
        self.pose, self.color = pose, color


def draw_lines(geom, gym, viewer, env, pose):
    pass
