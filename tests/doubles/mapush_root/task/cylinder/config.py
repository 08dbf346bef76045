"""Stand-in for MAPush's task/cylinder/config.py (tests only): a Go1PushMidCfg of our own."""


class Go1PushMidCfg(object):
    class env(object):
        env_name = "cylinder"
        num_envs = 10
        num_agents = 2
        episode_length_s = 2.0
        record_video = False

    class sim(object):
        dt = 0.05

        class physx(object):
            max_gpu_contact_pairs = 2 ** 23

    class control(object):
        decimation = 2

    class goal(object):
        general_dist = False
