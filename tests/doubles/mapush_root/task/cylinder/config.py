"""Stand-in for MAPush's task/cylinder/config.py (tests only): a Go1PushMidCfg of our own that,
like upstream's, inherits from Go1Cfg and sets the object's agents (task/cylinder/config.py:10)."""
from mqe.envs.go1.go1 import Go1Cfg


class Go1PushMidCfg(Go1Cfg):
    class env(Go1Cfg.env):
        env_name = "cylinder"
        num_envs = 10
        num_agents = 3
        num_npcs = 2
        episode_length_s = 2.0

    class asset(Go1Cfg.asset):
        # the object's URDF names the object (task/cylinder/config.py:17); the double loads none
        file_npc = "{LEGGED_GYM_ROOT_DIR}/resources/objects/cylinder/BigCylinder.urdf"

    class sim(Go1Cfg.sim):
        dt = 0.05

    class control(Go1Cfg.control):
        decimation = 2
