"""The tests' own helpers, where `make test`'s workers depend on them: a worker runs many test
files in one process, in an order that changes from run to run, so a helper must neither leave
state behind nor be misled by what an earlier file left."""
import sys
import types

from tests import upstream
from tests.conftest import DOUBLES, double_config


def mqe_modules():
    return sorted(m for m in sys.modules if m == "mqe" or m.startswith("mqe."))


def test_double_config_leaves_no_mqe_and_no_path_behind(monkeypatch):
    # a clean process's state, whatever this worker ran before (restored after the test)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(DOUBLES)])
    for name in mqe_modules():
        monkeypatch.delitem(sys.modules, name)
    path = list(sys.path)
    cfg = double_config("cuboid")
    assert cfg.control.decimation * cfg.sim.dt > 0  # its Go1Cfg base came from the double's mqe
    assert sys.path == path
    assert mqe_modules() == []


def test_the_pristine_openrl_is_found_on_the_path_whatever_sys_modules_holds(monkeypatch,
                                                                            tmp_path):
    monkeypatch.delenv("MAPUSH_PRISTINE_OPENRL", raising=False)
    found = upstream.pristine_openrl_dir()
    patched = tmp_path / "patched" / "openrl"  # what tests/test_schema.py leaves imported
    patched.mkdir(parents=True)
    module = types.ModuleType("openrl")
    module.__spec__ = types.SimpleNamespace(name="openrl", submodule_search_locations=[
        str(patched)], origin=str(patched / "__init__.py"), loader=None, parent="openrl")
    module.__path__ = [str(patched)]
    monkeypatch.setitem(sys.modules, "openrl", module)
    assert upstream.pristine_openrl_dir() == found != patched
