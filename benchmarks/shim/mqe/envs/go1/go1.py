"""Benchmark stand-in for ``mqe.envs.go1.go1.Go1Cfg``: the base the object configs under
``tests/doubles/mapush_root/task/`` inherit from (as upstream's ``task/<object>/config.py``
do). Only the sections the product reads; the GPU double takes its timing from its knobs."""


class Go1Cfg(object):
    class env(object):
        num_envs = 10
        num_agents = 1
        num_npcs = 0
        episode_length_s = 10.0
        record_video = False

    class sim(object):
        dt = 0.005

        class physx(object):
            max_gpu_contact_pairs = 2 ** 23

    class control(object):
        control_type = "C"
        decimation = 4

    class asset(object):
        npc_collision = True
        _npc_collision = False

    class goal(object):
        general_dist = False
