"""Stand-in for ``isaacgym.torch_utils`` (tests only): the rotation and sampling helpers of
Isaac Gym Preview 4, with its behaviour where MQE and our patches depend on it.

Isaac Gym's module is not plain Python, and neither is this one:
- **TorchScript.** Every tensor helper is compiled with ``torch.jit.script`` at import, as
  Isaac Gym's are (only ``to_torch``, ``get_axis_params`` and ``unscale_np`` stay Python).
  So they run in TorchScript's interpreter, refuse the argument types Isaac Gym's refuse
  (``torch_rand_float``'s shape is a ``Tuple[int, int]``, its device a ``str``; an
  unannotated argument is a Tensor), and are invisible to Python-level hooks.
- **The host copy in ``copysign``.** Isaac Gym's ``copysign(a, b)`` builds its magnitude as
  ``torch.tensor(a, device=b.device, dtype=torch.float)``, repeated to ``b``'s length: a
  host-to-device copy of one float on every call (on CUDA a pageable copy with a stream
  sync, which a CUDA graph capture refuses). ``get_euler_xyz`` calls it for the pitch, so
  it makes the same copy. This module does the same, so a captured region that calls it
  fails here as it would on a GPU with Isaac Gym.
- **Isaac Gym's formulas**, in the same order of operations, so values match bit for bit:
  quaternions ``(x, y, z, w)``; ``get_euler_xyz``'s cosines as ``w^2 - x^2 - y^2 + z^2``
  (roll) and ``w^2 + x^2 - y^2 - z^2`` (yaw), not ``1 - 2(...)`` (they differ for a
  quaternion that is not exactly unit), its pitch ``asin`` but where ``|sinp| >= 1``
  (there ``copysign(pi / 2, sinp)``), each angle ``% (2 * pi)`` into ``[0, 2*pi)``;
  ``quat_mul`` by its 8-product scheme; ``quat_rotate`` by ``bmm``.

Written from Isaac Gym's documented behaviour (``docs/api/python/...`` and the module's
public interface), not copied.
"""
import numpy as np
import torch


def to_torch(x, dtype=torch.float, device="cuda:0", requires_grad=False):
    return torch.tensor(x, dtype=dtype, device=device, requires_grad=requires_grad)


def get_axis_params(value, axis_idx, x_value=0., dtype=float, n_dims=3):
    """A list of ``n_dims`` numbers: ``value`` at ``axis_idx``, ``x_value`` at 0, else 0
    (Isaac Gym's default dtype ``np.float``, an alias of ``float`` in the image's numpy)."""
    assert axis_idx < n_dims, "the axis dim should be within the vector dimensions"
    params = np.zeros((n_dims,))
    params[axis_idx] = value
    params[0] = x_value
    return list(params.astype(dtype))


@torch.jit.script
def quat_mul(a, b):
    assert a.shape == b.shape
    shape = a.shape
    p = a.reshape(-1, 4)
    q = b.reshape(-1, 4)
    px, py, pz, pw = p[:, 0], p[:, 1], p[:, 2], p[:, 3]
    qx, qy, qz, qw = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    t1 = (pz + px) * (qx + qy)
    t2 = (pw - py) * (qw + qz)
    t3 = (pw + py) * (qw - qz)
    t4 = t1 + t2 + t3
    half = 0.5 * (t4 + (pz - px) * (qx - qy))
    w = half - t1 + (pz - py) * (qy - qz)
    x = half - t4 + (px + pw) * (qx + qw)
    y = half - t2 + (pw - px) * (qy + qz)
    z = half - t3 + (pz + py) * (qw - qx)
    return torch.stack([x, y, z, w], dim=-1).view(shape)


@torch.jit.script
def normalize(x, eps: float = 1e-9):
    return x / x.norm(p=2, dim=-1).clamp(min=eps, max=None).unsqueeze(-1)


@torch.jit.script
def quat_apply(a, b):
    shape = b.shape
    q = a.reshape(-1, 4)
    v = b.reshape(-1, 3)
    u = q[:, :3]
    t = u.cross(v, dim=-1) * 2
    return (v + q[:, 3:] * t + u.cross(t, dim=-1)).view(shape)


@torch.jit.script
def _rotate_parts(q, v):
    # type: (Tensor, Tensor) -> Tuple[Tensor, Tensor, Tensor]
    n = q.shape[0]
    w = q[:, -1]
    u = q[:, :3]
    along = v * (2.0 * w ** 2 - 1.0).unsqueeze(-1)
    across = torch.cross(u, v, dim=-1) * w.unsqueeze(-1) * 2.0
    axial = u * torch.bmm(u.view(n, 1, 3), v.view(n, 3, 1)).squeeze(-1) * 2.0
    return along, across, axial


@torch.jit.script
def quat_rotate(q, v):
    along, across, axial = _rotate_parts(q, v)
    return along + across + axial


@torch.jit.script
def quat_rotate_inverse(q, v):
    along, across, axial = _rotate_parts(q, v)
    return along - across + axial


@torch.jit.script
def quat_conjugate(a):
    shape = a.shape
    q = a.reshape(-1, 4)
    return torch.cat((-q[:, :3], q[:, -1:]), dim=-1).view(shape)


@torch.jit.script
def quat_unit(a):
    return normalize(a)


@torch.jit.script
def quat_from_angle_axis(angle, axis):
    half = (angle / 2).unsqueeze(-1)
    return quat_unit(torch.cat([normalize(axis) * half.sin(), half.cos()], dim=-1))


@torch.jit.script
def normalize_angle(x):
    return torch.atan2(torch.sin(x), torch.cos(x))


@torch.jit.script
def tf_inverse(q, t):
    inv = quat_conjugate(q)
    return inv, -quat_apply(inv, t)


@torch.jit.script
def tf_apply(q, t, v):
    return quat_apply(q, v) + t


@torch.jit.script
def tf_vector(q, v):
    return quat_apply(q, v)


@torch.jit.script
def tf_combine(q1, t1, q2, t2):
    return quat_mul(q1, q2), quat_apply(q1, t2) + t1


@torch.jit.script
def get_basis_vector(q, v):
    return quat_rotate(q, v)


@torch.jit.script
def copysign(a, b):
    # type: (float, Tensor) -> Tensor
    # |a| with the sign of each element of b; the magnitude is made on the host and copied to
    # b's device on every call, as Isaac Gym's is
    magnitude = torch.tensor(a, device=b.device, dtype=torch.float).repeat(b.shape[0])
    return torch.abs(magnitude) * torch.sign(b)


@torch.jit.script
def get_euler_xyz(q):
    x, y, z, w = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    roll = torch.atan2(2.0 * (w * x + y * z), w * w - x * x - y * y + z * z)
    sinp = 2.0 * (w * y - z * x)
    pitch = torch.where(torch.abs(sinp) >= 1, copysign(np.pi / 2.0, sinp), torch.asin(sinp))
    yaw = torch.atan2(2.0 * (w * z + x * y), w * w + x * x - y * y - z * z)
    return roll % (2 * np.pi), pitch % (2 * np.pi), yaw % (2 * np.pi)


@torch.jit.script
def quat_from_euler_xyz(roll, pitch, yaw):
    cy, sy = torch.cos(yaw * 0.5), torch.sin(yaw * 0.5)
    cr, sr = torch.cos(roll * 0.5), torch.sin(roll * 0.5)
    cp, sp = torch.cos(pitch * 0.5), torch.sin(pitch * 0.5)
    qw = cy * cr * cp + sy * sr * sp
    qx = cy * sr * cp - sy * cr * sp
    qy = cy * cr * sp + sy * sr * cp
    qz = sy * cr * cp - cy * sr * sp
    return torch.stack([qx, qy, qz, qw], dim=-1)


@torch.jit.script
def torch_rand_float(lower, upper, shape, device):
    # type: (float, float, Tuple[int, int], str) -> Tensor
    return (upper - lower) * torch.rand(*shape, device=device) + lower


@torch.jit.script
def torch_random_dir_2(shape, device):
    # type: (Tuple[int, int], str) -> Tensor
    angle = torch_rand_float(-np.pi, np.pi, shape, device).squeeze(-1)
    return torch.stack([torch.cos(angle), torch.sin(angle)], dim=-1)


@torch.jit.script
def tensor_clamp(t, min_t, max_t):
    return torch.max(torch.min(t, max_t), min_t)


@torch.jit.script
def scale(x, lower, upper):
    return 0.5 * (x + 1.0) * (upper - lower) + lower


@torch.jit.script
def unscale(x, lower, upper):
    return (2.0 * x - upper - lower) / (upper - lower)


def unscale_np(x, lower, upper):
    return (2.0 * x - upper - lower) / (upper - lower)
