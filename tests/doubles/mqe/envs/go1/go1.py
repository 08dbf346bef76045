"""Double of ``mqe.envs.go1.go1``: ``Go1Cfg``, the base every object config inherits from.

Like upstream's ``task/<object>/config.py``, the double's object configs under
``mapush_root/task/`` do ``from mqe.envs.go1.go1 import Go1Cfg`` and override what differs.
Each value that the product relies on cites where MAPush (at the pinned commit) sets it.
"""


class Go1Cfg(object):
    class env(object):
        env_name = "go1"
        num_envs = 256                 # mqe/envs/go1/go1_config.py:38
        num_agents = 1
        num_npcs = 0                   # mqe/envs/base/legged_robot_config.py:43
        episode_length_s = 5           # mqe/envs/go1/go1_config.py:45
        record_video = True            # mqe/envs/go1/go1_config.py:49
        recording_width_px = 360 * 3   # :51 (the camera on env 0)
        recording_height_px = 360 * 3  # :52

    class sim(object):
        dt = 0.005                     # mqe/envs/base/legged_robot_config.py:212

        class physx(object):
            max_gpu_contact_pairs = 2 ** 23   # mqe/envs/base/legged_robot_config.py

    class control(object):
        control_type = "C"             # mqe/envs/go1/go1_config.py:109
        decimation = 4                 # mqe/envs/go1/go1_config.py:119
        # Relative to the working directory, as upstream has them
        # (mqe/envs/go1/go1_config.py:122-123); loaded right after prepare_sim
        # (mqe/envs/go1/go1.py:366, 396-397).
        locomotion_policy_dir = "./mqe/utils/locomotion_checkpoints/walk_these_ways"
        actuator_network_path = "./resources/actuator_nets"

    class asset(object):
        npc_collision = True
        _npc_collision = False

    class goal(object):
        general_dist = False

    class rewards(object):
        expanded_ocb_reward = False

        class scales(object):
            # The seven scales of task/cuboid/config.py (values of our own choosing).
            target_reward_scale = 0.00325
            approach_reward_scale = 0.00075
            collision_punishment_scale = -0.0015
            push_reward_scale = 0.0015
            ocb_reward_scale = 0.004
            reach_target_reward_scale = 10
            exception_punishment_scale = -5
