"""Stand-in for Isaac Gym's Python 3.8 bindings ``gym_38`` (tests only).

Its one role here: ``gymapi.SIM_PHYSX`` is a ``SimType`` of this module, as in the real
package, so a run's config pickled into an OpenRL ``module.pt`` names
``isaacgym._bindings.linux-x86_64.gym_38.SimType``, as the authors' published checkpoints
do; a pybind11 enum pickles as ``SimType.__new__`` plus its int state.
"""


class SimType(object):
    def __init__(self, value=0):
        self.value = int(value)

    def __getstate__(self):
        return self.value

    def __setstate__(self, state):
        self.value = int(state)

    def __eq__(self, other):
        return isinstance(other, SimType) and other.value == self.value

    def __hash__(self):
        return hash(self.value)

    def __repr__(self):
        return "SimType.%s" % ("SIM_PHYSX" if self.value == 0 else "SIM_FLEX")


SIM_PHYSX = SimType(0)
SIM_FLEX = SimType(1)
