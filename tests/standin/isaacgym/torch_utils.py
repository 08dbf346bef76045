"""Stand-in for ``isaacgym.torch_utils`` (tests only): the rotation and sampling helpers
MQE uses, written from the math.

Conventions, as Isaac Gym's: quaternions are ``(x, y, z, w)`` in the last dimension; Euler
angles are roll about x, then pitch about y, then yaw about z (``q = qz * qy * qx``), and
``get_euler_xyz`` returns each angle wrapped into ``[0, 2*pi)``.
"""
import numpy as np
import torch


def to_torch(x, dtype=torch.float, device="cuda:0", requires_grad=False):
    return torch.tensor(x, dtype=dtype, device=device, requires_grad=requires_grad)


def get_axis_params(value, axis_idx, x_value=0., dtype=float, n_dims=3):
    """A list of ``n_dims`` numbers: ``value`` at ``axis_idx``, ``x_value`` at 0, else 0."""
    params = [0.0] * n_dims
    params[0] = x_value
    params[axis_idx] = value
    return [dtype(p) for p in params]


def torch_rand_float(lower, upper, shape, device):
    """Uniform samples in [lower, upper) of ``shape``."""
    return lower + (upper - lower) * torch.rand(*shape, device=device)


def torch_random_dir_2(shape, device):
    angle = torch_rand_float(-np.pi, np.pi, shape, device).squeeze(-1)
    return torch.stack([torch.cos(angle), torch.sin(angle)], dim=-1)


def copysign(a, b):
    """|a| with the sign of each element of b (a is a float)."""
    return torch.copysign(torch.full_like(b, float(a)), b)


def normalize(x, eps=1e-9):
    return x / x.norm(p=2, dim=-1).clamp(min=eps).unsqueeze(-1)


def tensor_clamp(t, min_t, max_t):
    return torch.max(torch.min(t, max_t), min_t)


def scale(x, lower, upper):
    """[-1, 1] to [lower, upper]."""
    return 0.5 * (x + 1.0) * (upper - lower) + lower


def unscale(x, lower, upper):
    """[lower, upper] to [-1, 1]."""
    return (2.0 * x - upper - lower) / (upper - lower)


def saturate(x, lower, upper):
    return torch.max(torch.min(x, upper), lower)


def normalize_angle(x):
    return torch.atan2(torch.sin(x), torch.cos(x))


def quat_unit(a):
    return normalize(a)


def quat_mul(a, b):
    """Hamilton product ``a * b``."""
    shape = a.shape
    a = a.reshape(-1, 4)
    b = b.reshape(-1, 4)
    ax, ay, az, aw = a.unbind(-1)
    bx, by, bz, bw = b.unbind(-1)
    out = torch.stack([
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    ], dim=-1)
    return out.view(shape)


def quat_conjugate(a):
    shape = a.shape
    a = a.reshape(-1, 4)
    return torch.cat((-a[:, :3], a[:, 3:]), dim=-1).view(shape)


def _rotate(q, v, inverse):
    # v' = v + 2w (u x v) + 2 u x (u x v), u the vector part; the inverse flips u.
    u = q[:, :3] * (-1.0 if inverse else 1.0)
    w = q[:, 3:4]
    uv = torch.cross(u, v, dim=-1)
    return v + 2.0 * (w * uv + torch.cross(u, uv, dim=-1))


def quat_apply(a, b):
    """Rotate the vectors b by the quaternions a (any leading shape)."""
    shape = b.shape
    return _rotate(a.reshape(-1, 4), b.reshape(-1, 3), False).view(shape)


def quat_rotate(q, v):
    return _rotate(q, v, False)


def quat_rotate_inverse(q, v):
    return _rotate(q, v, True)


def quat_axis(q, axis=0):
    basis = torch.zeros(q.shape[0], 3, device=q.device)
    basis[:, axis] = 1
    return quat_rotate(q, basis)


def quat_from_angle_axis(angle, axis):
    half = (angle / 2).unsqueeze(-1)
    return quat_unit(torch.cat([normalize(axis) * torch.sin(half), torch.cos(half)], dim=-1))


def quat_to_angle_axis(q):
    q = quat_unit(q)
    w = q[..., 3].clamp(-1.0, 1.0)
    angle = 2.0 * torch.acos(w)
    sin_half = torch.sqrt(torch.clamp(1.0 - w * w, min=0.0))
    axis = q[..., :3] / sin_half.clamp(min=1e-5).unsqueeze(-1)
    small = sin_half <= 1e-5
    axis = torch.where(small.unsqueeze(-1), torch.tensor([0.0, 0.0, 1.0], device=q.device)
                       .expand_as(axis), axis)
    angle = torch.where(small, torch.zeros_like(angle), angle)
    return angle, axis


def quat_from_euler_xyz(roll, pitch, yaw):
    cr, sr = torch.cos(roll * 0.5), torch.sin(roll * 0.5)
    cp, sp = torch.cos(pitch * 0.5), torch.sin(pitch * 0.5)
    cy, sy = torch.cos(yaw * 0.5), torch.sin(yaw * 0.5)
    return torch.stack([
        sr * cp * cy - cr * sp * sy,
        cr * sp * cy + sr * cp * sy,
        cr * cp * sy - sr * sp * cy,
        cr * cp * cy + sr * sp * sy,
    ], dim=-1)


def get_euler_xyz(q):
    """(roll, pitch, yaw) of ``q``, each in [0, 2*pi)."""
    x, y, z, w = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    roll = torch.atan2(2.0 * (w * x + y * z), 1.0 - 2.0 * (x * x + y * y))
    pitch = torch.asin(torch.clamp(2.0 * (w * y - z * x), -1.0, 1.0))
    yaw = torch.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    two_pi = 2.0 * np.pi
    return roll % two_pi, pitch % two_pi, yaw % two_pi


def tf_apply(q, t, v):
    return quat_apply(q, v) + t


def tf_inverse(q, t):
    q_inv = quat_conjugate(q)
    return q_inv, -quat_apply(q_inv, t)


def tf_combine(q1, t1, q2, t2):
    return quat_mul(q1, q2), quat_apply(q1, t2) + t1
