"""``ast.unparse`` on every Python the suite runs on.

Python 3.8 (``make test-stack``, the image's interpreter) has no ``ast.unparse``. The tests
that read upstream's source with it check facts of the source, not of the stack, so there
the node is handed, as ``ast.dump`` text, to the test venv's newer Python to unparse, as the
linters of ``make test`` are taken from that venv too.
"""
import ast
import os
import subprocess
from functools import lru_cache
from pathlib import Path

from tests.upstream import REPO

# MAPUSH_DEV_PYTHON: that Python where the venv is not (inside the image: make image-check)
_DEV_PYTHON = Path(os.environ.get("MAPUSH_DEV_PYTHON") or REPO / ".venv" / "bin" / "python")
_UNPARSE = ("import ast, sys\n"
            "node = ast.fix_missing_locations(eval(sys.stdin.read(), dict(vars(ast))))\n"
            "print(ast.unparse(node), end='')")


@lru_cache(maxsize=None)
def _unparse_dump(dump: str) -> str:
    proc = subprocess.run([str(_DEV_PYTHON), "-c", _UNPARSE], input=dump, text=True,
                          capture_output=True, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError("unparse through %s failed: %s" % (_DEV_PYTHON, proc.stderr))
    return proc.stdout


def unparse(node: ast.AST) -> str:
    if hasattr(ast, "unparse"):
        return ast.unparse(node)  # novermin
    return _unparse_dump(ast.dump(node))
