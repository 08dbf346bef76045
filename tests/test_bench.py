"""`make bench` keeps working: the benchmark's CPU smoke runs every section and reports."""
import json
import subprocess
import sys

import pytest

from tests.conftest import REPO


def test_quick_benchmark_runs_every_section_on_cpu(upstream, tmp_path):
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "run.py"), "--quick", "--site",
         str(upstream["site"]), "--records", str(upstream["records"]), "--out", str(tmp_path),
         "--tag", "ci"], capture_output=True, text=True, timeout=300, cwd=str(REPO))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads((tmp_path / "ci.json").read_text())
    table = (tmp_path / "ci.md").read_text()
    assert "## Targets" in table and "(a) Adapter cost per env step" in table
    sections = result["sections"]
    assert set(sections) >= {"adapters", "memory", "profile", "train", "startup"}
    for size in sections["adapters"]["sizes"].values():
        for variant in ("seed", "harl", "openrl"):
            assert size["step_ms"][variant]["median"] > 0, variant
    runs = sections["train"]["runs"]
    assert {r["algo"] for r in runs} == {"happo", "ppo"}
    assert all(r["exit"] == 0 and r["env_steps"] > 0 for r in runs)


def test_harl_rollout_times_at_least_20_iterations_after_10_of_warm_up(tmp_path, capsys):
    """The HARL benchmark's statistics: the median and interquartile range of what follows
    the warm-up, and a refusal of a run too short to give 20 timed iterations."""
    from benchmarks import harl_rollout

    values = [100.0] * 10 + [float(v) for v in range(1, 21)]  # warm-up, then 1..20
    median, iqr = harl_rollout.summary(values, 10)
    assert median == 10.5 and iqr == pytest.approx(15.75 - 5.25)
    with pytest.raises(SystemExit) as stop:
        harl_rollout.main(["--site", "s", "--pristine-site", "p", "--records", "r", "--out",
                           str(tmp_path / "out.json"), "--iterations", "30"])
    assert stop.value.code == 2 and "fewer than 20 timed" in capsys.readouterr().err
