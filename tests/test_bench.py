"""`make bench` keeps working: the benchmark's CPU smoke runs every section and reports."""
import json
import subprocess
import sys

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
