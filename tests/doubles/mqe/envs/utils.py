"""Double of ``mqe.envs.utils``: ``make_mqe_env``, ``custom_cfg``, ``ENV_DICT``.

The ``go1push_mid`` double follows MAPush at the pinned commit (docs/upstream.md lists the
facts; each is cited with its upstream file and line where the double encodes it, and
tests/test_upstream_contract.py checks them against a real checkout): agents from the
object's config (3 for the cylinder), obs ``(num_envs, num_agents, 2 + 3 * num_agents)``,
actions ``(num_envs, num_agents, 3)`` on ``env.device``, per-agent rewards
``(num_envs, num_agents)`` from seven terms, termination ``(num_envs,)`` bool, the episode
buffers, the first-episode-only calculator buffers, ``reward_buffer``, models loaded by
paths relative to the working directory, and no ``close()``. Episodes are deterministic:

- env ``i`` succeeds (``finished_buf``) after ``MQE_DOUBLE_SUCCESS_STEP`` steps (default 5) if
  it is listed in ``MQE_DOUBLE_SUCCESS_ENVS`` (comma list, ``all``, or ``none``; default:
  even envs); the others time out after ``max_episode_length + 1`` steps (MQE's ``>``);
- envs in ``MQE_DOUBLE_COLLAB_ENVS`` (same syntax, default none) count every step of their
  first episode in ``collaboration_degree_buf``; ``MQE_DOUBLE_COLLIDE_ENVS`` likewise in
  ``collision_degree_buf``, but only for a task with obstacles (``env.num_obs``), as MQE;
  ``MQE_DOUBLE_OBSTACLE_ENVS`` likewise in ``obstacle_collision_degree_buf`` (our
  patches/mapush/05, also only with obstacles);
- the upper wrapper plans on ``reset()`` only when ``rrt_planning`` is on (patches/mapush/04):
  straight paths, ``rrt_stats``, and a PNG ``rrt-env<i>.png`` for each of the first
  ``MAPUSH_RRT_FIGURES`` envs (default 8) in ``MAPUSH_FIGURE_DIR`` when it is set.

Other knobs (environment variables, so they reach the training child process):
``MQE_DOUBLE_CRASH_PHASE`` (create_sim, terrain, envs, prepare_sim, first_step, training)
kills the process with SIGSEGV there (``training`` at step ``MQE_DOUBLE_CRASH_STEP``, default
50); ``MQE_DOUBLE_DEVICE_ASSERT=STEP`` raises CUDA's device-side assert message at that step;
``MQE_DOUBLE_LEAK_MB`` keeps that many MB per 100 steps (``MQE_DOUBLE_LEAK_EVERY`` steps)
alive on the env's device;
``MQE_DOUBLE_STEP_SLEEP`` sleeps that many seconds per step; ``MQE_DOUBLE_RECORD_ACTIONS=FILE``
saves the first actions received (``.npy``); ``MQE_DOUBLE_LOG=FILE`` appends one JSON line
per env created (object, num_envs, device, contact pairs); ``MQE_DOUBLE_FORBID_CUDA=1``
makes any ``.cuda()`` call or CUDA tensor raise.
"""
import json
import os
import signal
import time

import numpy as np

from isaacgym import gymapi
from mqe.envs.go1.go1 import Go1Cfg

import gym
import torch
from gym import spaces


def _env_list(name, n, default):
    raw = os.environ.get(name, default)
    if raw == "all":
        return torch.ones(n, dtype=torch.bool)
    mask = torch.zeros(n, dtype=torch.bool)
    if raw in ("", "none"):
        return mask
    if raw == "even":
        mask[0::2] = True
        return mask
    for part in raw.split(","):
        if int(part) < n:
            mask[int(part)] = True
    return mask


def _forbid_cuda():
    # One function per name: torch._dynamo (imported lazily, e.g. by torch.optim) refuses
    # to see one function object under two torch names.
    def refuser(name):
        def refuse(*_a, **_k):
            raise AssertionError("MQE double: %s touched CUDA with MQE_DOUBLE_FORBID_CUDA=1"
                                 % name)

        return refuse

    torch.Tensor.cuda = refuser("Tensor.cuda")
    torch.cuda.current_device = refuser("torch.cuda.current_device")
    torch.cuda.synchronize = refuser("torch.cuda.synchronize")
    torch.cuda.set_device = refuser("torch.cuda.set_device")


class Go1PushMidDoubleCfg(Go1Cfg):
    """Installed default config (``mqe/envs/configs/go1_push_mid_config.py`` upstream)."""

    class env(Go1Cfg.env):
        env_name = "installed-default"
        num_envs = 10
        num_agents = 2
        num_npcs = 2
        episode_length_s = 2.0

    class sim(Go1Cfg.sim):
        dt = 0.05

    class control(Go1Cfg.control):
        decimation = 2


def _load_standin(path):
    """Open a stand-in model file by the path MQE would hand to ``torch.jit.load``: relative
    paths resolve against the working directory, as upstream's do."""
    if not os.path.isfile(path):
        # torch.jit.load's own message for a missing file
        raise ValueError("The provided filename %s does not exist" % path)
    with open(path, "rb") as fh:
        return fh.read()


class Go1PushMidDouble(object):
    """The env as the MQE wrapper exposes it."""

    def __init__(self, cfg, sim_params, physics_engine, sim_device, headless):
        if os.environ.get("MQE_DOUBLE_FORBID_CUDA") == "1":
            _forbid_cuda()
        self.cfg = cfg
        self.num_envs = int(cfg.env.num_envs)
        # Agents come from the object's config: 3 for the cylinder, 2 for cuboid and Tblock
        # (task/<object>/config.py:10).
        self.num_agents = int(cfg.env.num_agents)
        self.num_npcs = int(cfg.env.num_npcs)
        # Obstacles: only the upper task has them (go1_push_upper_config.py:11).
        self.num_obs = int(getattr(cfg.env, "num_obs", 0))
        use_gpu = sim_device.startswith("cuda") and sim_params.use_gpu_pipeline
        self.device = sim_device if use_gpu else "cpu"
        multiplier = float(os.environ.get("MAPUSH_CONTACT_PAIRS_MULTIPLIER", "1"))
        self.contact_pairs = int(cfg.sim.physx.max_gpu_contact_pairs * multiplier)

        self.gym = gymapi.acquire_gym()
        self.sim = self.gym.create_sim(0, 0, physics_engine, sim_params)
        self.gym.add_triangle_mesh(self.sim, np.zeros(0, np.float32), np.zeros(0, np.uint32),
                                   gymapi.TriangleMeshParams())
        for _ in range(self.num_envs):
            self.gym.create_env(self.sim, None, None, 1)
        self.gym.prepare_sim(self.sim)
        # Right after prepare_sim, Go1 loads its models by the config's paths, which are
        # relative to the working directory (mqe/envs/go1/go1.py:366, 396-397).
        self.loaded_models = []
        if cfg.control.control_type in ("actuator_net", "C"):
            self.loaded_models.append(cfg.control.actuator_network_path + "/unitree_go1.pt")
        self.loaded_models += [cfg.control.locomotion_policy_dir + "/body_latest.jit",
                               cfg.control.locomotion_policy_dir + "/adaptation_module_latest.jit"]
        for path in self.loaded_models:
            _load_standin(path)

        # mqe/envs/base/legged_robot.py:1269,1276
        self.dt = float(cfg.control.decimation * cfg.sim.dt)
        self.max_episode_length = int(np.ceil(cfg.env.episode_length_s / self.dt))
        # go1_push_mid_wrapper.py:53-57
        obs_dim = (3 if getattr(cfg.goal, "general_dist", False) else 2) + 3 * self.num_agents
        self.observation_space = spaces.Box(low=-float("inf"), high=float("inf"),
                                            shape=(obs_dim,), dtype=float)
        self.action_space = spaces.Box(low=-1, high=1, shape=(3,), dtype=float)
        self.scales = cfg.rewards.scales

        n, dev = self.num_envs, self.device
        self.success_envs = _env_list("MQE_DOUBLE_SUCCESS_ENVS", n, "even").to(dev)
        self.collide_envs = _env_list("MQE_DOUBLE_COLLIDE_ENVS", n, "none").to(dev)
        self.collab_envs = _env_list("MQE_DOUBLE_COLLAB_ENVS", n, "none").to(dev)
        self.success_step = int(os.environ.get("MQE_DOUBLE_SUCCESS_STEP", "5"))
        self.finished_buf = torch.zeros(n, dtype=torch.bool, device=dev)
        # The state arrays `mapush doctor --check-step` traces (legged_robot.py's names); the
        # double's world does not move, so they stay as set here.
        self.dof_pos = torch.zeros(n * self.num_agents, 12, device=dev)
        self.root_states = torch.zeros(n * self.num_agents, 13, device=dev)
        self.root_states_npc = torch.zeros(n * self.num_npcs, 13, device=dev)
        self.time_out_buf = torch.zeros(n, dtype=torch.bool, device=dev)
        self.reset_buf = torch.ones(n, dtype=torch.long, device=dev)
        self.episode_length_buf = torch.zeros(n, dtype=torch.long, device=dev)
        # The calculator's buffers: set once, never reset, so they describe each env's
        # FIRST episode only (mqe/envs/field/legged_robot_field.py:24-31).
        self.collision_degree_buf = torch.zeros(n, dtype=torch.float, device=dev)
        self.collaboration_degree_buf = torch.zeros(n, dtype=torch.float, device=dev)
        self.obstacle_collision_degree_buf = torch.zeros(n, dtype=torch.float, device=dev)
        self.obstacle_envs = _env_list("MQE_DOUBLE_OBSTACLE_ENVS", n, "none").to(dev)
        self.init_reset_buf = torch.zeros(n, dtype=torch.bool, device=dev)
        self.init_finished_buf = torch.zeros(n, dtype=torch.bool, device=dev)
        self.init_episode_length_buf = torch.full((n,), self.max_episode_length,
                                                  dtype=torch.long, device=dev)
        # The seven reward terms and step_count (go1_push_mid_wrapper.py:71-80).
        self.reward_buffer = {
            "distance_to_target_reward": 0, "exception_punishment": 0,
            "approach_to_box_reward": 0, "collision_punishment": 0,
            "reach_target_reward": 0, "push_reward": 0, "ocb_reward": 0, "step_count": 0,
        }
        self._state = torch.zeros(n, self.num_agents, obs_dim, device=dev)
        self._steps = 0
        self._leak = []
        # The camera of record_video (mqe/envs/base/legged_robot.py:1171-1178).
        self.record_now = False
        self.video_frames = []
        self.complete_video_frames = []
        if cfg.env.record_video:
            self.recording_size = (int(cfg.env.recording_height_px),
                                   int(cfg.env.recording_width_px))
        log = os.environ.get("MQE_DOUBLE_LOG")
        if log:
            with open(log, "a") as fh:
                fh.write(json.dumps({"object": cfg.env.env_name, "num_envs": n,
                                     "num_agents": self.num_agents, "device": str(dev),
                                     "contact_pairs": self.contact_pairs,
                                     "cwd": os.getcwd(), "pid": os.getpid(),
                                     "mplbackend": os.environ.get("MPLBACKEND"),
                                     "figure_dir": os.environ.get("MAPUSH_FIGURE_DIR"),
                                     "command_network_path": getattr(
                                         cfg.control, "command_network_path", None)}) + "\n")

    def reset(self):
        self._state.zero_()
        self.episode_length_buf.zero_()
        return self._state.clone()

    # -- MQE's recording API (legged_robot.py:1180-1212), with a synthetic picture ----------
    def start_recording(self):
        self.complete_video_frames = []
        self.record_now = True

    def pause_recording(self):
        self.complete_video_frames = []
        self.video_frames = []
        self.record_now = False

    def get_complete_frames(self):
        if self.complete_video_frames is None:
            return []
        return self.complete_video_frames

    def store_recording(self, env_ids):
        if self.cfg.env.record_video and 0 in env_ids:
            if self.complete_video_frames is None:
                self.complete_video_frames = []
            else:
                self.complete_video_frames = self.video_frames[:]
            self.video_frames = []

    def _render_headless(self):
        """Env 0 seen from above: a grey floor, the box (white) moving towards the target
        (green) as the episode goes on, and one coloured square per robot; RGBA uint8 of
        ``(recording_height_px, recording_width_px, 4)``, as Isaac Gym's camera returns."""
        if not (self.record_now and self.complete_video_frames is not None
                and len(self.complete_video_frames) == 0):
            return
        h, w = self.recording_size
        frame = np.full((h, w, 4), 90, dtype=np.uint8)
        frame[:, :, 3] = 255
        unit = max(2, min(h, w) // 12)
        progress = float(self.episode_length_buf[0]) / max(1, self.max_episode_length)
        frame[h // 2 - unit:h // 2 + unit, w - 3 * unit:w - unit, :3] = (40, 200, 60)
        bx = int(unit + progress * (w - 5 * unit))
        frame[h // 2 - unit:h // 2 + unit, bx:bx + 2 * unit, :3] = 235
        for i in range(self.num_agents):
            y = int((i + 1) * h / (self.num_agents + 1))
            x = max(0, bx - 2 * unit)
            frame[y:y + unit, x:x + unit, :3] = ((200, 40, 40), (40, 80, 220),
                                                 (230, 180, 30))[i % 3]
        self.video_frames.append(frame)

    def _check_termination(self):
        """Termination and the calculator's first-episode buffers, in upstream's order."""
        self.finished_buf = self.success_envs & (self.episode_length_buf >= self.success_step)
        # `>`, not `>=`: an episode that times out lasts max_episode_length + 1 steps
        # (mqe/envs/base/legged_robot.py:196).
        self.time_out_buf = self.episode_length_buf > self.max_episode_length
        self.reset_buf = (self.time_out_buf | self.finished_buf).long()
        # mqe/envs/field/legged_robot_field.py:204-230: first episodes only.
        first = ~self.init_reset_buf
        self.init_finished_buf |= first & self.finished_buf
        newly = first & self.finished_buf
        self.init_episode_length_buf[newly] = self.episode_length_buf[newly]
        if self.num_obs != 0:  # the collision counter moves only with obstacles (line 216)
            self.collision_degree_buf += (self.collide_envs & first).float()
            self.obstacle_collision_degree_buf += (self.obstacle_envs & first).float()
        self.collaboration_degree_buf += (self.collab_envs & first).float()
        self.init_reset_buf |= self.reset_buf.bool()

    def _reward(self, actions):
        """``(num_envs, num_agents)``: shared terms plus per-robot approach, collision and OCB
        terms (go1_push_mid_wrapper.py:308-391); ``reward_buffer`` gets the same mix of
        Python numbers, CPU tensors and numpy floats as upstream's."""
        s, buf = self.scales, self.reward_buffer
        n, a = self.num_envs, self.num_agents
        buf["step_count"] += 1
        reward = torch.zeros(n, a, device=self.device)
        if s.reach_target_reward_scale != 0:  # shared
            reward[self.finished_buf, :] += s.reach_target_reward_scale
            buf["reach_target_reward"] += s.reach_target_reward_scale * self.finished_buf.sum().item()
        if s.exception_punishment_scale != 0:  # shared; the double has no exceptions
            buf["exception_punishment"] += s.exception_punishment_scale * 0
        if s.target_reward_scale != 0:  # shared
            distance = s.target_reward_scale * 100 * -(actions[:, :, 0].mean(dim=1) - 0.5) ** 2
            reward += distance.unsqueeze(1)
            buf["distance_to_target_reward"] += torch.sum(distance).cpu()
        if s.approach_reward_scale != 0:  # per robot
            logged = []
            for i in range(a):
                approach = -((actions[:, i, 1] - 0.5) + 0.5) ** 2 * s.approach_reward_scale
                logged.append(torch.sum(approach).cpu())
                reward[:, i] += approach
            buf["approach_to_box_reward"] += np.sum(np.array(logged))
        if s.collision_punishment_scale != 0:  # per pair of robots, to both
            logged = []
            for i in range(a):
                for j in range(i + 1, a):
                    gap = (actions[:, i, 0] - actions[:, j, 0]).abs() + 1.0
                    punish = (1 / (0.02 + gap / 3)) * s.collision_punishment_scale
                    logged.append(torch.sum(punish).cpu())
                    reward[:, i] += punish
                    reward[:, j] += punish
            buf["collision_punishment"] += np.sum(np.array(logged))
        if s.push_reward_scale != 0:  # shared
            push = torch.zeros(n, device=self.device)
            push[actions.abs().mean(dim=(1, 2)) > 0.1] = s.push_reward_scale
            reward += push.unsqueeze(1)
            buf["push_reward"] += torch.sum(push).cpu()
        if s.ocb_reward_scale != 0:  # per robot
            logged = []
            for i in range(a):
                ocb = actions[:, i, 2] * s.ocb_reward_scale
                reward[:, i] += ocb
                logged.append(torch.sum(ocb).cpu())
            buf["ocb_reward"] += np.sum(np.array(logged))
        return reward

    def step(self, actions):
        self._steps += 1
        if self._steps == 1:
            if os.environ.get("MQE_DOUBLE_CRASH_PHASE") == "first_step":
                os.kill(os.getpid(), signal.SIGSEGV)
            record = os.environ.get("MQE_DOUBLE_RECORD_ACTIONS")
            if record:
                np.save(record, actions.detach().cpu().numpy())
        if (os.environ.get("MQE_DOUBLE_CRASH_PHASE") == "training"
                and self._steps == int(os.environ.get("MQE_DOUBLE_CRASH_STEP", "50"))):
            os.kill(os.getpid(), signal.SIGSEGV)
        if self._steps == int(os.environ.get("MQE_DOUBLE_DEVICE_ASSERT", "0")):
            raise RuntimeError("CUDA error: device-side assert triggered\nCUDA kernel errors "
                               "might be asynchronously reported at some other API call")
        leak = float(os.environ.get("MQE_DOUBLE_LEAK_MB", "0"))
        if leak and self._steps % int(os.environ.get("MQE_DOUBLE_LEAK_EVERY", "100")) == 0:
            self._leak.append(torch.zeros(int(leak * 2 ** 18), device=self.device))
        sleep = float(os.environ.get("MQE_DOUBLE_STEP_SLEEP", "0"))
        if sleep:
            time.sleep(sleep)

        expected = (self.num_envs, self.num_agents, self.action_space.shape[0])
        if tuple(actions.shape) != expected:
            raise RuntimeError("MQE double: actions of shape %s, expected %s"
                               % (tuple(actions.shape), expected))
        if str(actions.device) != str(torch.device(self.device)):
            raise RuntimeError("MQE double: actions on %s, env on %s"
                               % (actions.device, self.device))
        actions = torch.clip(actions, -1.0, 1.0)  # go1_push_mid_wrapper.py:202
        self.episode_length_buf += 1
        self._check_termination()
        termination = self.reset_buf.bool()
        reward = self._reward(actions)
        self._state = torch.roll(self._state, 1, dims=2)
        self._state[:, :, 0] = actions[:, :, 0]
        self._state[:, :, 1] = self.episode_length_buf.float().unsqueeze(1) / self.max_episode_length
        if self.cfg.env.record_video and bool(termination[0]):
            self.store_recording([0])  # reset_idx (legged_robot.py:256)
        self.episode_length_buf[termination] = 0
        if self.cfg.env.record_video:
            self._render_headless()  # the end of step (legged_robot.py:185)
        return self._state.clone(), reward, termination, {}


class Go1PushMidDoubleWrapper(gym.Wrapper):
    """Like upstream's wrapper: a ``gym.Wrapper`` (mqe/envs/wrappers/empty_wrapper.py:4) that
    forwards attributes to the env. Its inherited ``close()`` calls ``env.close()``, which
    Go1 does not have: an AttributeError, as upstream."""

    def __init__(self, env):
        self.env = env
        self.observation_space = env.observation_space
        self.action_space = env.action_space

    def __getattr__(self, name):
        if name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)

    def reset(self):
        return self.env.reset()

    def step(self, actions):
        return self.env.step(actions)


class Go1PushUpperDoubleCfg(Go1Cfg):
    """Installed upper config (``mqe/envs/configs/go1_push_upper_config.py`` upstream): two
    robots, two obstacles, the final target, ``hie`` (one centralized agent), and the
    mid-level policy it drives by a path relative to the working directory (line 90)."""

    class env(Go1Cfg.env):
        env_name = "go1push_upper"
        num_envs = 10
        num_agents = 2        # go1_push_upper_config.py:10
        num_obs = 2           # :11
        num_npcs = 3 + num_obs  # :12
        episode_length_s = 4.0  # 160 s upstream (:13): 8000 steps; shorter here
        hie = True            # :14

    class asset(Go1Cfg.asset):
        file_npc = "{LEGGED_GYM_ROOT_DIR}/resources/objects/MiddleBox.urdf"  # :20
        file_npc_final = "{LEGGED_GYM_ROOT_DIR}/resources/objects/cylinder_blue.urdf"  # :36
        npc_collision_final = False
        obs_npc_collision = True

    class sim(Go1Cfg.sim):
        dt = 0.05

    class control(Go1Cfg.control):
        decimation = 2
        command_network_path = "./resources/command_nets/1.2x1.2.pt"  # :90

    class rewards(Go1Cfg.rewards):
        class scales(object):
            target_reward_scale = 1.0
            reach_target_reward_scale = 10
            trajectory_rewards_scale = 0.5
            exception_punishment_scale = -5
            obstacle_reward_scale = -0.5


class Go1PushUpperDouble(Go1PushMidDouble):
    """The robots and box of the mid-level double, driven by the high level's sub-goals;
    obstacles (``num_obs``), so MQE's collision counter moves (legged_robot_field.py:216)."""

    def _reward(self, actions):
        self.reward_buffer["step_count"] += 1
        reward = -(actions - 0.5).pow(2).mean(dim=2)
        if self.finished_buf.any():
            reward[self.finished_buf, :] += self.scales.reach_target_reward_scale
            self.reward_buffer["reach_target_reward"] += \
                self.scales.reach_target_reward_scale * self.finished_buf.sum().item()
        return reward


class Go1PushUpperDoubleWrapper(Go1PushMidDoubleWrapper):
    """Like upstream's ``Go1PushUpperWrapper`` (go1_push_upper_wrapper.py): one centralized
    agent, obs ``(num_envs, 1, 26)`` (hard-coded for 2 robots and 2 obstacles, line 89),
    actions ``(num_envs, 1, 2)`` = a sub-goal (line 90); the mid-level policy is loaded
    whole with ``torch.load`` from ``control.command_network_path`` (line 127) and asked
    ``act(obs, rnn_states, masks, deterministic=True)`` each step on the 8-dim mid-level obs
    of each robot, flattened to ``(num_envs * num_agents, 8)`` numpy, with RNN states
    ``(num_envs * num_agents, 1, 64)`` (lines 121, 291-303); its output is halved and
    clipped to [-1, 1] (lines 305-307) and drives the robots."""

    OBS_DIM = 26
    MID_OBS = 8

    def __init__(self, env):
        super(Go1PushUpperDoubleWrapper, self).__init__(env)
        self.observation_space = spaces.Box(low=-float("inf"), high=float("inf"),
                                            shape=(self.OBS_DIM,), dtype=float)
        self.action_space = spaces.Box(low=-1, high=1, shape=(2,), dtype=float)
        n, a = env.num_envs, env.num_agents
        self.rnn_states_command = np.zeros((n * a, 1, 64))
        self.mask_command = np.ones((n * a, 1))
        path = env.cfg.control.command_network_path
        _load_standin(path)  # relative to the working directory, as torch.load resolves it
        self.command_module = torch.load(path, map_location=env.device, weights_only=False)
        self.commands_seen = []
        self.rrt_planning = False  # patches/mapush/04: off, as upstream trains
        self.rrt_stats = None
        env.reward_buffer = {  # go1_push_upper_wrapper.py:101-108
            "distance_to_target_reward": 0, "exception_punishment": 0,
            "obstacle_reward_scale": 0, "reach_target_reward": 0, "trajectory_rewards": 0,
            "step_count": 0,
        }

    def _obs(self):
        n = self.env.num_envs
        obs = torch.zeros(n, 1, self.OBS_DIM, device=self.env.device)
        obs[:, 0, 0] = self.env.episode_length_buf.float() / self.env.max_episode_length
        return obs

    def reset(self):
        self.env.reset()
        if self.rrt_planning and self.env.num_obs > 0:
            self._plan()
        return self._obs()

    def _plan(self):
        n = self.env.num_envs
        folder = os.environ.get("MAPUSH_FIGURE_DIR")
        saved = []
        if folder:
            os.makedirs(folder, exist_ok=True)
            for i in range(min(int(os.environ.get("MAPUSH_RRT_FIGURES", "8")), n)):
                path = os.path.join(folder, "rrt-env%d.png" % i)
                with open(path, "wb") as fh:
                    fh.write(b"\x89PNG\r\n\x1a\n")
                saved.append(path)
        self.rrt_stats = {"envs": n, "planned": n, "failed": 0, "seconds": 0.0,
                          "figures": saved}

    def step(self, actions):
        n, a = self.env.num_envs, self.env.num_agents
        expected = (n, 1, 2)
        if tuple(actions.shape) != expected:
            raise RuntimeError("MQE double (upper): actions of shape %s, expected %s"
                               % (tuple(actions.shape), expected))
        sub_goals = torch.clip(actions, -1, 1).squeeze(1)
        mid_obs = np.zeros((n * a, self.MID_OBS), dtype=np.float32)
        mid_obs[:, 0] = np.repeat(sub_goals[:, 0].detach().cpu().numpy(), a)
        command, _rnn = self.command_module.act(mid_obs, self.rnn_states_command,
                                                self.mask_command, deterministic=True)
        command = np.array(np.split(np.asarray(command.detach().cpu()
                                               if hasattr(command, "detach") else command),
                                    n))
        self.commands_seen.append(command.shape)
        command = torch.from_numpy(0.5 * command).to(self.env.device).clip(-1, 1).float()
        _obs, reward, termination, info = self.env.step(command)
        buf = self.env.reward_buffer
        for key in ("distance_to_target_reward", "obstacle_reward_scale", "trajectory_rewards"):
            buf[key] += torch.sum(reward.mean(dim=1)).cpu()
        return self._obs(), reward.mean(dim=1, keepdim=True), termination, info


ENV_DICT = {
    "go1push_mid": {
        "class": Go1PushMidDouble,
        "config": Go1PushMidDoubleCfg,
        "wrapper": Go1PushMidDoubleWrapper,
    },
    "go1push_upper": {
        "class": Go1PushUpperDouble,
        "config": Go1PushUpperDoubleCfg,
        "wrapper": Go1PushUpperDoubleWrapper,
    },
}


class _SimParams(object):
    def __init__(self, use_gpu_pipeline):
        self.use_gpu_pipeline = use_gpu_pipeline


def make_mqe_env(env_name, args=None, custom_cfg=None):
    env_dict = ENV_DICT[env_name]
    if callable(custom_cfg):
        env_dict["config"] = custom_cfg(env_dict["config"])
    cfg = env_dict["config"]
    if getattr(args, "num_envs", None) is not None:
        cfg.env.num_envs = args.num_envs
    env = env_dict["class"](cfg, _SimParams(args.use_gpu_pipeline), args.physics_engine,
                            args.sim_device, args.headless)
    return env_dict["wrapper"](env), cfg


def custom_cfg(args):
    def fn(cfg):
        if getattr(args, "num_envs", None) is not None:
            cfg.env.num_envs = args.num_envs
        cfg.env.record_video = args.record_video
        return cfg

    return fn
