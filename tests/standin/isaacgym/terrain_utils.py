"""Stand-in for ``isaacgym.terrain_utils`` (tests only): the height field's sub-terrain and
its conversion to a triangle mesh, which MQE's BarrierTrack terrain uses. The generators of
other terrains (slopes, stairs, stones) are not stood in: MQE's push tasks use none."""
import numpy as np


class SubTerrain(object):
    def __init__(self, terrain_name="terrain", width=256, length=256, vertical_scale=1.0,
                 horizontal_scale=1.0):
        self.terrain_name = terrain_name
        self.vertical_scale = vertical_scale
        self.horizontal_scale = horizontal_scale
        self.width = width
        self.length = length
        self.height_field_raw = np.zeros((self.width, self.length), dtype=np.int16)


def convert_heightfield_to_trimesh(height_field_raw, horizontal_scale, vertical_scale,
                                   slope_threshold=None):
    """A grid of rows x cols heights as vertices ``(rows * cols, 3)`` float32 and two
    triangles per cell ``(2 * (rows - 1) * (cols - 1), 3)`` uint32. ``slope_threshold``
    (which moves vertices of steep cells in Isaac Gym) is accepted and not applied: it
    changes no shape."""
    heights = np.asarray(height_field_raw)
    rows, cols = heights.shape
    x = np.repeat(np.arange(rows) * horizontal_scale, cols)
    y = np.tile(np.arange(cols) * horizontal_scale, rows)
    vertices = np.stack([x, y, heights.reshape(-1) * vertical_scale], axis=-1)
    vertices = vertices.astype(np.float32)
    r, c = np.meshgrid(np.arange(rows - 1), np.arange(cols - 1), indexing="ij")
    v0 = (r * cols + c).reshape(-1)
    v1, v2, v3 = v0 + cols, v0 + 1, v0 + cols + 1
    triangles = np.empty((2 * v0.size, 3), dtype=np.uint32)
    triangles[0::2] = np.stack([v0, v3, v1], axis=-1)
    triangles[1::2] = np.stack([v0, v2, v3], axis=-1)
    return vertices, triangles


def _not_stood_in(name):
    def generator(*args, **kwargs):
        raise NotImplementedError("isaacgym stand-in: terrain_utils.%s is not stood in (MQE's "
                                  "push tasks use none of it)" % name)
    generator.__name__ = name
    return generator


for _name in ("pyramid_sloped_terrain", "random_uniform_terrain", "pyramid_stairs_terrain",
              "discrete_obstacles_terrain", "stepping_stones_terrain", "sloped_terrain",
              "wave_terrain", "stairs_terrain"):
    globals()[_name] = _not_stood_in(_name)
