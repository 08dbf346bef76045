"""How tests/mqe_coverage.py counts the go1push path (#79 item 6): the GPU pipeline's lines are
on it (every real GPU run takes them), counted as not run in CI, never left out of it."""
from tests import mqe_coverage


def test_gpu_only_lines_stay_on_the_path_as_not_run():
    groups = {"": [10, 11], "the viewer's debug drawing": [20, 21, 22],
              "CUDA only (patch 08's graph capture)": [30, 31, 32, 33],
              "CUDA only: the GPU pipeline": [40]}
    off, gpu = mqe_coverage.off_and_gpu(groups)
    assert (off, gpu) == (3, 5)  # the viewer is off the path; the five CUDA lines are on it
    # every reason in the YAML that says CUDA marks lines of the GPU pipeline, so it counts
    cuda = [e for e in mqe_coverage.entries() if "CUDA" in e["reason"]]
    assert cuda and all(e["reason"].startswith(mqe_coverage.GPU_ONLY) for e in cuda)
