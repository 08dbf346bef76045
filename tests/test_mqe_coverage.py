"""How tests/mqe_coverage.py counts the go1push path (#79 item 6): the GPU pipeline's lines are
on it (every real GPU run takes them), counted as not run in CI, never left out of it."""
from pathlib import Path

import pytest

from tests import mqe_coverage
from tests.conftest import MAPUSH_SRC, NO_SRC


def test_gpu_only_lines_stay_on_the_path_as_not_run():
    groups = {"": [10, 11], "the viewer's debug drawing": [20, 21, 22],
              "CUDA only (patch 08's graph capture)": [30, 31, 32, 33],
              "CUDA only: the GPU pipeline": [40]}
    off, gpu = mqe_coverage.off_and_gpu(groups)
    assert (off, gpu) == (3, 5)  # the viewer is off the path; the five CUDA lines are on it
    # every reason in the YAML that says CUDA marks lines of the GPU pipeline, so it counts
    cuda = [e for e in mqe_coverage.entries() if "CUDA" in e["reason"]]
    assert cuda and all(e["reason"].startswith(mqe_coverage.GPU_ONLY) for e in cuda)


def test_the_outcomes_the_world_cannot_produce_are_found_in_upstreams_file():
    """#79 item 5: the lines of MQE's roll, pitch and z_wave terminations at the pin, which the
    stand-in runs and never trips (its bodies keep height, roll and pitch), are the ones left
    out of the go1push path's figure: each termination's buffer, computed and or-ed in."""
    if not MAPUSH_SRC:
        pytest.skip(NO_SRC)
    upstream_tree, name = Path(MAPUSH_SRC), "mqe/envs/field/legged_robot_field.py"
    found = mqe_coverage.unproducible(upstream_tree, name)
    text = (upstream_tree / name).read_text().splitlines()
    assert sorted(found) == [149, 150, 153, 154, 158, 160, 162, 163]
    assert "roll_kwargs" in text[148] and "pitch_kwargs" in text[152]
    assert all("z_wave" in text[n - 1] for n in (158, 160, 162, 163))
