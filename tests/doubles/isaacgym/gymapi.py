"""Stand-in for ``isaacgym.gymapi``: a gym object whose allocating calls can crash."""
import os
import signal

import importlib

# As the real gymapi re-exports its compiled bindings' enums.
_bindings = importlib.import_module("isaacgym._bindings.linux-x86_64.gym_38")
SimType = _bindings.SimType
SIM_PHYSX = _bindings.SIM_PHYSX
SIM_FLEX = _bindings.SIM_FLEX


def _maybe_crash(phase):
    if os.environ.get("MQE_DOUBLE_CRASH_PHASE") == phase:
        os.kill(os.getpid(), signal.SIGSEGV)


class SimParams(object):
    pass


class _Gym(object):
    def create_sim(self, compute_device, graphics_device, engine, params):
        _maybe_crash("create_sim")
        return object()

    def add_ground(self, sim, params):
        _maybe_crash("terrain")

    def add_triangle_mesh(self, sim, vertices, triangles, params):
        _maybe_crash("terrain")

    def create_env(self, sim, lower, upper, per_row):
        _maybe_crash("envs")
        return object()

    def prepare_sim(self, sim):
        _maybe_crash("prepare_sim")
        return True

    def simulate(self, sim):
        return None


def acquire_gym():
    return _Gym()
