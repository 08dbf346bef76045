"""Check that DeferredEpisodeStats computes exactly what EpisodeStats computes.

``python benchmarks/check_prototype.py``: random done/finished/counter sequences (counters
cumulative per env, as MQE's), several buffer capacities and windows (small windows force
ring overwrites within one flush); exits 1 on the first difference.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from benchmarks.prototype_stats import DeferredEpisodeStats  # noqa: E402
from mapush.envs.stats import EpisodeStats  # noqa: E402


class FakeEnv(object):
    def __init__(self, n, seed):
        self.g = torch.Generator().manual_seed(seed)
        self.num_envs, self.device, self.dt, self.max_episode_length = n, "cpu", 0.1, 50
        self.finished_buf = torch.zeros(n, dtype=torch.bool)
        self.collision_degree_buf = torch.zeros(n)
        self.collaboration_degree_buf = torch.zeros(n)

    def step(self, p_done):
        n = self.num_envs
        self.collision_degree_buf += (torch.rand(n, generator=self.g) < 0.3).float()
        self.collaboration_degree_buf += (torch.rand(n, generator=self.g) < 0.5).float()
        self.finished_buf = torch.rand(n, generator=self.g) < 0.5
        return torch.rand(n, generator=self.g) < p_done


def check(n, steps, capacity, window, p_done, seed):
    env = FakeEnv(n, seed)
    ref = EpisodeStats.for_env(env, window=window)
    new = DeferredEpisodeStats.for_env(env, window=window, capacity=capacity)
    for i in range(steps):
        done = env.step(p_done)
        ref.update(env, done)
        new.update(env, done)
        if i % 37 == 36 or i == steps - 1:
            if ref.summary() != new.summary():
                return "summary at step %d: %s != %s" % (i, ref.summary(), new.summary())
            for name in ("success", "finished_time", "collision", "collaboration", "filled",
                         "ep_len", "ep_collision", "ep_collaboration", "cursor", "episodes"):
                a, b = getattr(ref, name), getattr(new.inner, name)
                if not torch.allclose(a[: ref.size].float() if a.dim() else a.float(),
                                      b[: ref.size].float() if b.dim() else b.float(),
                                      atol=1e-5):
                    return "%s differs at step %d" % (name, i)
    return None


def main():
    cases = [(8, 300, c, w, p, s) for c in (1, 7, 64) for w in (4, 1000) for p in (0.05, 0.5)
             for s in (0, 1)]
    for case in cases:
        err = check(*case)
        if err:
            print("FAIL n=%d steps=%d capacity=%d window=%d p_done=%.2f seed=%d: %s"
                  % (case + (err,)))
            return 1
    print("ok: %d cases identical" % len(cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
