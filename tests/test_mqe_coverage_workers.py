"""MQE's coverage figure over pytest-xdist's workers (tests/mqe_coverage.py): each worker's
real-MQE tests run over that worker's own copy of the tree, measured under its own rc file, and
``combined`` maps every copy onto the first, so no worker's lines are lost. Runs where
coverage.py is (the image's test additions, env/requirements-stack-test.txt: CI runs it
there, as make test-stack does)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import mqe_coverage

coverage = pytest.importorskip("coverage", reason="coverage.py is a test addition of the "
                               "image's stack (env/requirements-stack-test.txt): make test-stack")
SOURCE = "def f(x):\n    if x:\n        return 1\n    return 2\n"


def test_each_workers_lines_are_counted_on_one_tree(tmp_path):
    folder = tmp_path / "coverage"
    for worker, arg in (("gw0", "True"), ("gw1", "False")):
        tree = tmp_path / worker / "MAPush"
        (tree / "mqe").mkdir(parents=True)
        (tree / "mqe" / "__init__.py").write_text("")
        (tree / "mqe" / "m.py").write_text(SOURCE)
        rc = mqe_coverage.rcfile(folder, tree, worker)
        env = dict(os.environ, COVERAGE_PROCESS_START=str(rc), PYTHONPATH=os.pathsep.join(
            [str(Path(__file__).parent / "coverage_hook"), str(tree),
             os.path.dirname(os.path.dirname(coverage.__file__))]))
        subprocess.run([sys.executable, "-c", "import mqe.m; mqe.m.f(%s)" % arg], env=env,
                       check=True)
    tree, cov = mqe_coverage.combined(folder)
    assert tree == tmp_path / "gw0" / "MAPush"
    measured = sorted(Path(f) for f in cov.get_data().measured_files())
    # gw1's copy mapped onto gw0's: gw0's files only
    assert measured == [tree / "mqe" / "__init__.py", tree / "mqe" / "m.py"], measured
    _, statements, _, missing, _ = cov.analysis2(str(tree / "mqe" / "m.py"))
    assert len(statements) == 4 and missing == [], missing  # line 3 from gw0, line 4 from gw1
    assert mqe_coverage.combined(tmp_path / "empty") is None
