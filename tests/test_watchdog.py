"""Memory watchdog: logs memory every N updates, warns once on steady growth (incident 001)."""
import io
import random

import pytest

from mapush.run.watchdog import MemoryWatchdog, host_rss_mb


class Feed(object):
    """Injected measurements: ``values[i]`` MB at the i-th sample."""

    def __init__(self, values):
        self.values = list(values)
        self.i = 0

    def __call__(self):
        value = self.values[min(self.i, len(self.values) - 1)]
        self.i += 1
        return {"memory/gpu_allocated_mb": value, "memory/gpu_reserved_mb": value + 512}


def run(values, updates, every=10, warmup=5, steps_per_update=1000, **kw):
    logged, err = [], io.StringIO()
    dog = MemoryWatchdog("cuda:0", lambda tag, value, step: logged.append((tag, value, step)),
                         every=every, warmup=warmup, stream=err, sampler=Feed(values), **kw)
    for update in range(1, updates + 1):
        dog.sample(update, update * steps_per_update)
    return dog, logged, err.getvalue()


def test_samples_every_n_updates_and_logs_both_tags_on_the_env_step_axis():
    _dog, logged, _ = run([1000.0] * 10, updates=35, every=10)
    allocated = [(v, s) for t, v, s in logged if t == "memory/gpu_allocated_mb"]
    reserved = [(v, s) for t, v, s in logged if t == "memory/gpu_reserved_mb"]
    assert [s for _v, s in allocated] == [10000, 20000, 30000]
    assert [v for v, _s in reserved] == [1512.0] * 3


def test_steady_growth_after_warmup_warns_once_with_the_rate():
    # warm-up: allocator caches fill; then +20 MB every sample (every 10 updates) = 2000/1k.
    values = [500, 900, 1200, 1300, 1300] + [1300 + 20 * i for i in range(1, 40)]
    dog, logged, err = run(values, updates=400)
    assert dog.warned
    assert err.count("grows steadily") == 1
    assert "+2000.0 MB per 1000 updates" in err
    assert "+2000.0 MB per million env steps" in err
    rates = [v for t, v, _s in logged if t == "memory/growth_mb_per_1k_updates"]
    assert len(rates) == 1 and abs(rates[0] - 2000.0) < 1e-6


def test_warmup_growth_and_flat_memory_do_not_warn():
    values = [100, 800, 1500, 2200, 2900] + [2900] * 40  # grows only during warm-up
    dog, _logged, err = run(values, updates=450)
    assert not dog.warned and err == ""


def test_noise_and_a_single_jump_do_not_warn():
    rng = random.Random(0)
    noisy = [2000 + rng.uniform(-30, 30) for _ in range(60)]
    dog, _, err = run(noisy, updates=600)
    assert not dog.warned, err
    jump = [2000] * 20 + [2400] * 40  # one-off allocation, then flat
    dog, _, err = run(jump, updates=600)
    assert not dog.warned, err


def test_growth_below_the_threshold_does_not_warn():
    slow = [1000 + 0.5 * i for i in range(60)]  # 0.5 MB per sample: fragmentation, not a leak
    dog, _, _ = run(slow, updates=600)
    assert not dog.warned


def test_the_warm_up_samples_are_not_tracked_and_steady_means_most_steps_up():
    """The first ``warmup`` samples are logged but never judged: tracking starts at the
    next one. Steady growth needs most steps of the window up (``min_positive``): memory
    that rises 100 MB and gives back 90 in turn, half its steps down, does not warn, though
    it ends higher; the same net growth in steps that all go up does."""
    dog, logged, _ = run([1000.0] * 10, updates=100, every=10, warmup=5)
    assert len([t for t, _v, _s in logged if t == "memory/gpu_allocated_mb"]) == 10
    assert [update for update, _step, _mb in dog.samples] == [60, 70, 80, 90, 100]
    saw = [1000.0] * 5 + [1000.0 + 10 * (i // 2) + 90 * (i % 2) for i in range(40)]
    dog, _, err = run(saw, updates=450)
    assert saw[-1] - saw[5] > 64 * 2 and not dog.warned, err
    ramp = [1000.0] * 5 + [1000.0 + 10 * i for i in range(40)]
    assert run(ramp, updates=450)[0].warned


def test_cpu_device_logs_host_rss():
    logged = []
    dog = MemoryWatchdog("cpu", lambda tag, value, step: logged.append((tag, value, step)), every=1)
    dog.sample(1, 64)
    assert [t for t, _v, _s in logged] == ["memory/host_rss_mb"]
    assert 1.0 < logged[0][1] == logged[0][1] and abs(logged[0][1] - host_rss_mb()) < 64


def test_environment_overrides_the_knobs(monkeypatch):
    monkeypatch.setenv("MAPUSH_WATCHDOG", "every=1,warmup=0,window=3,threshold_mb=5,bogus=1")
    dog, _, err = run([100, 110, 120, 130], updates=3, every=10, warmup=5)
    assert (dog.every, dog.warmup, dog.window, dog.threshold_mb) == (1, 0, 3, 5.0)
    assert dog.warned and "+10000.0 MB per 1000 updates" in err


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_a_knob_that_is_not_a_finite_non_negative_number_is_ignored_with_a_warning(
        monkeypatch, capsys, value):
    """#36: MAPUSH_WATCHDOG=every=nan ended the run in a traceback (int(nan))."""
    monkeypatch.setenv("MAPUSH_WATCHDOG", "every=%s,window=3" % value)
    dog, _, _ = run([100, 110, 120, 130], updates=3, every=10, warmup=5)
    assert (dog.every, dog.window) == (10, 3)
    assert "ignoring 'every=%s'" % value in capsys.readouterr().err


LEAK_CONFIG = "train:\n  episode_length: 20\nalgo:\n  ppo_epoch: 1\n  critic_epoch: 1\n"


def test_a_leaking_run_warns_once_naming_the_rate(upstream, tmp_path):
    """The double keeps 40 MB alive every 20 env steps (one HARL update of 20 steps): host
    RSS on CPU grows ~40 MB per update. (Flat runs are checked in test_stop_resume.py.)"""
    from tests.conftest import double_env, run_mapush
    from tests.test_stop_resume import scalar_steps

    config = tmp_path / "small.yaml"
    config.write_text(LEAK_CONFIG)
    out = run_mapush(["train", "--algo", "happo", "--num-envs", "8", "--steps", 8 * 20 * 8,
                      "--sim-device", "cpu", "--rl-device", "cpu", "--config", config,
                      "--run-dir", tmp_path / "run"],
                     env=double_env(upstream, MQE_DOUBLE_LEAK_MB="40", MQE_DOUBLE_LEAK_EVERY="20",
                                    MAPUSH_WATCHDOG="every=1,warmup=2,window=4,threshold_mb=32"),
                     timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    warnings = [line for line in out.stderr.splitlines() if "grows steadily" in line]
    assert len(warnings) == 1, out.stderr[-3000:]
    rate = float(warnings[0].split("+", 1)[1].split(" MB per 1000 updates")[0])
    assert 20000 <= rate <= 60000, warnings[0]  # ~40 MB per update
    assert len(scalar_steps(tmp_path / "run", "memory/growth_mb_per_1k_updates")) == 1
