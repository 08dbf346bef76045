"""Stand-in for ``isaacgym.gymtorch`` (tests only): gym tensors to torch tensors and back.
The real module compiles a torch extension; here a gym tensor is a descriptor that holds
the torch tensor, so ``wrap_tensor`` shares the sim's memory as the real one does."""
import torch

from isaacgym import gymapi


def wrap_tensor(gym_tensor, offsets=None, counts=None):
    if not isinstance(gym_tensor, gymapi.Tensor):
        raise TypeError("wrap_tensor expects a gym tensor, got %s" % type(gym_tensor).__name__)
    return gym_tensor.data


def unwrap_tensor(torch_tensor):
    if not isinstance(torch_tensor, torch.Tensor):
        raise TypeError("unwrap_tensor expects a torch tensor, got %s"
                        % type(torch_tensor).__name__)
    if not torch_tensor.is_contiguous():
        raise ValueError("unwrap_tensor: the tensor must be contiguous")
    if torch_tensor.dtype not in GYM_DTYPES:  # as Isaac Gym's dtype mapping refuses it
        raise Exception("Unsupported Gym tensor dtype")
    if torch_tensor.device.type not in ("cpu", "cuda"):
        raise Exception("Unsupported Gym tensor device")
    return gymapi.Tensor(torch_tensor)


# the torch dtypes a gym tensor can have (Isaac Gym maps each to a DTYPE_*: float32, uint8,
# int16, and int32 and int64 as unsigned); float64, bool and the rest are refused
GYM_DTYPES = (torch.float32, torch.uint8, torch.int16, torch.int32, torch.int64)
