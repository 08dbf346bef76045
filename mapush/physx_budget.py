"""PhysX GPU contact-buffer budget: size ``max_gpu_contact_pairs`` for the run, not x5."""
import sys
from contextlib import suppress
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

from mapush import schema
from mapush.common.atomic import write_json
from mapush.errors import MapushError
from mapush.objects import ObjectFacts

MULTIPLIER_ENV = "MAPUSH_CONTACT_PAIRS_MULTIPLIER"
UPSTREAM_CONTACT_PAIRS = 2 ** 23  # legged_robot_config.py: sim.physx.max_gpu_contact_pairs
UPSTREAM_MULTIPLIER = 5           # base_task.py multiplies it unconditionally
BYTES_PER_CONTACT_PAIR = 256
MIN_CONTACT_PAIRS = 2 ** 18       # 64 MiB: a floor so a tiny run never overflows
SHAPES_PER_GO1 = 23
PARTNERS_PER_SHAPE = 3
POINTS_PER_PAIR = 4
MARGIN = 4
CONTACT_SHARE = 0.25              # share of free GPU memory the contact buffer may take
# Memory of the rest of a run, for the doctor's "enough free memory" check: a CUDA context
# for torch and one for PhysX, PhysX heaps (default_buffer_size_multiplier 5), gymtorch, the
# walk-these-ways locomotion nets; and per env the PhysX state of 2 articulations + box and
# MQE's tensors and rollout storage. Deliberately generous (incident 000: 200 envs ran in 8 GB).
FIXED_RUN_MB = 1536
PER_ENV_MB = 4.0
MB = 1024 * 1024


@dataclass(frozen=True)
class TaskBodies:
    """Collision shapes of one env of a task."""
    robots: int
    shapes_per_robot: int = SHAPES_PER_GO1
    object_shapes: int = 1
    other_shapes: int = 0   # obstacles, and targets that collide
    actors: int = 0         # every actor of the env (recorded; targets may have no shape)

    @property
    def shapes(self) -> int:
        return self.robots * self.shapes_per_robot + self.object_shapes + self.other_shapes

    @classmethod
    def of(cls, facts: ObjectFacts) -> "TaskBodies":
        """Every actor of the env that has a collision shape (see the module docstring)."""
        others = (int(facts.target_collides)
                  + int(facts.final_target and facts.final_target_collides)
                  + (facts.num_obs if facts.obstacles_collide else 0))
        return cls(robots=facts.num_agents, other_shapes=others, actors=facts.actors)


def contacts_needed(num_envs: int, bodies: TaskBodies) -> int:
    """Contact pairs ``num_envs`` envs can need at once (no margin)."""
    return int(num_envs) * bodies.shapes * PARTNERS_PER_SHAPE * POINTS_PER_PAIR


def contact_bytes(pairs: int) -> int:
    return int(pairs) * BYTES_PER_CONTACT_PAIR


def next_pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


@dataclass
class ContactBudget:
    """The chosen ``max_gpu_contact_pairs`` and what it costs."""
    num_envs: int
    needed: int                  # contacts the envs can need, no margin
    pairs: int                   # max_gpu_contact_pairs to use
    bytes: int                   # GPU memory the buffer costs
    free_bytes: Optional[int]    # free GPU memory it was sized against (None: unknown)
    allowed_bytes: Optional[int]  # the share of it the buffer may take
    fits: bool
    source: str                  # "budget" or "override"
    multiplier: Optional[float] = None

    def describe(self) -> str:
        mib = self.bytes / float(MB)
        if self.source == "override":
            return ("max_gpu_contact_pairs = 2**23 x %s = %d (%s set; %.0f MiB)"
                    % (self.multiplier, self.pairs, MULTIPLIER_ENV, mib))
        free = ("%.0f MiB free" % (self.free_bytes / float(MB))
                if self.free_bytes is not None else "free memory unknown")
        return ("max_gpu_contact_pairs = %d (2**%d) for %d envs needing ~%d: %.0f MiB of GPU "
                "memory (%s%s)" % (self.pairs, self.pairs.bit_length() - 1, self.num_envs,
                                   self.needed, mib, free, "" if self.fits else ", DOES NOT FIT"))


def choose_contact_pairs(num_envs: int, free_bytes: Optional[int],
                         bodies: TaskBodies, margin: int = MARGIN,
                         share: float = CONTACT_SHARE) -> ContactBudget:
    """The contact-pair budget (a power of two) for ``num_envs`` envs and the free memory
    (docs/architecture.md, "Modules")."""
    needed = contacts_needed(num_envs, bodies)
    floor = next_pow2(needed)
    pairs = max(next_pow2(needed * margin), MIN_CONTACT_PAIRS)
    allowed = None if free_bytes is None else int(free_bytes * share)
    if allowed is not None:
        while pairs > floor and contact_bytes(pairs) > allowed:
            pairs //= 2
    fits = allowed is None or contact_bytes(pairs) <= allowed
    return ContactBudget(num_envs=int(num_envs), needed=needed, pairs=pairs,
                         bytes=contact_bytes(pairs), free_bytes=free_bytes,
                         allowed_bytes=allowed, fits=fits, source="budget")


def override_budget(num_envs: int, multiplier: float, bodies: TaskBodies,
                    free_bytes: Optional[int] = None) -> ContactBudget:
    """What ``MAPUSH_CONTACT_PAIRS_MULTIPLIER`` makes the patched base_task.py allocate."""
    pairs = int(UPSTREAM_CONTACT_PAIRS * multiplier)
    return ContactBudget(num_envs=int(num_envs), needed=contacts_needed(num_envs, bodies),
                         pairs=pairs, bytes=contact_bytes(pairs), free_bytes=free_bytes,
                         allowed_bytes=None, fits=True, source="override", multiplier=multiplier)


def plan(num_envs: int, free_bytes: Optional[int], bodies: TaskBodies) -> ContactBudget:
    """The override (``MAPUSH_CONTACT_PAIRS_MULTIPLIER``, a positive number) when set, else
    the budget."""
    multiplier = schema.environ().get(MULTIPLIER_ENV)
    if multiplier is None:
        return choose_contact_pairs(num_envs, free_bytes, bodies)
    return override_budget(num_envs, multiplier, bodies, free_bytes)


def run_memory_mb(num_envs: int, budget: ContactBudget) -> float:
    """Rough GPU memory a run of ``num_envs`` envs takes, contact buffer included (MiB)."""
    return FIXED_RUN_MB + PER_ENV_MB * num_envs + budget.bytes / float(MB)


BUDGET_FILE = "contact_budget.json"


def sim_free_bytes(device: str) -> Optional[int]:
    """Free memory of the sim GPU, asked in the child after Isaac Gym was imported."""
    try:
        import torch

        free, _total = torch.cuda.mem_get_info(torch.device(device))
        return int(free)
    except Exception:  # noqa: BLE001 - unknown: size without the memory limit
        return None


def for_sim(spec: Any, bodies: TaskBodies, num_envs: Optional[int] = None) -> Optional[int]:
    """``max_gpu_contact_pairs`` for ``sim.make_env`` (None: upstream's), logged
    (docs/architecture.md, "Modules")."""
    device = str(spec.sim_device)
    if not device.startswith("cuda"):
        return None
    n = int(num_envs if num_envs is not None else spec.num_envs)
    free = sim_free_bytes(device)
    budget = plan(n, free, bodies)
    print("mapush: PhysX %s" % budget.describe(), file=sys.stderr, flush=True)
    run_dir = Path(str(spec.run_dir))
    with suppress(OSError):  # the record is for crash reports; the run goes on without it
        if run_dir.is_dir():
            write_json(run_dir / BUDGET_FILE, dict(asdict(budget), device=device,
                                                   shapes_per_env=bodies.shapes,
                                                   actors_per_env=bodies.actors))
    if not budget.fits:
        raise MapushError(
            "PhysX contact buffer for %d envs needs %.0f MiB but only %.0f MiB of %s's %.0f MiB "
            "free may go to it: lower --num-envs, free the GPU (nvidia-smi), or check "
            "'mapush doctor --num-envs %d'" % (n, budget.bytes / float(MB),
                                               (budget.allowed_bytes or 0) / float(MB), device,
                                               (free or 0) / float(MB), n))
    return None if budget.source == "override" else budget.pairs
