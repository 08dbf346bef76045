"""Shared fixtures: the MQE test double and patched copies of the real upstream code.

Nothing here is shipped. The product sees the double only because these fixtures put
``tests/doubles`` on ``PYTHONPATH`` and point ``MAPUSH_ROOT`` at ``tests/doubles/mapush_root``.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOUBLES = REPO / "tests" / "doubles"
DOUBLE_ROOT = DOUBLES / "mapush_root"
STANDIN = REPO / "tests" / "standin"
# MAPush at the pin for the real-MQE tests: MAPUSH_SRC, else (make test) the tree it fetched.
MAPUSH_SRC = os.environ.get("MAPUSH_SRC") or None
NO_SRC = ("MAPUSH_SRC is not set and MAPush could not be fetched at the pin (%s): no MAPush "
          "tree for the real-MQE tests" % os.environ.get("MAPUSH_SRC_MISSING", "no network"))


def pytest_report_header(config):
    """The stack the suite runs on (make test-stack prints it too)."""
    try:
        from importlib import metadata

        versions = ", ".join("%s %s" % (name, metadata.version(name))
                             for name in ("torch", "numpy", "openrl"))
    except Exception as exc:  # noqa: BLE001 - a header, not a test
        versions = "(%s)" % exc
    return "stack: Python %s, %s, MAPUSH_STACK=%s" % (
        sys.version.split()[0], versions, os.environ.get("MAPUSH_STACK", "(unset)"))


@pytest.fixture(scope="session")
def upstream(tmp_path_factory):
    """Real upstream packages patched by ``patches/apply``: ``{"site": dir holding the
    patched ``openrl/`` and ``harl/``, "records": dir of patch records}`` (see tests/upstream.py)."""
    from tests.upstream import build_patched_site

    return build_patched_site(tmp_path_factory.mktemp("upstream"))


@pytest.fixture(scope="session")
def real_mqe(upstream, tmp_path_factory):
    """MAPush's real tree, prepared as the image prepares it (``tests/standin/prepare_tree.py``:
    copied, patched, the missing locomotion body stood in), run over the Isaac Gym stand-in.
    ``{"tree": the tree, "records": patch records of openrl, harl and mapush}``; skipped,
    with the reason, where no MAPush tree is at hand."""
    if not MAPUSH_SRC:
        pytest.skip(NO_SRC)
    tree = prepare_tree(tmp_path_factory.mktemp("mapush") / "MAPush", pristine=False)
    records = tmp_path_factory.mktemp("records")
    for record in list(Path(upstream["records"]).glob("*.json")) + \
            list((tree / ".mapush-patches").glob("*.json")):
        (records / record.name).write_bytes(record.read_bytes())
    measured = os.environ.get("MAPUSH_MQE_COVERAGE")
    if measured:  # tests/mqe_coverage.py: this tree's children, and no other tree's
        from tests.mqe_coverage import rcfile

        measured = {"rc": str(rcfile(Path(measured), tree)), "tree": str(tree)}
    return {"tree": tree, "records": records, "site": upstream["site"], "coverage": measured}


PATCHES = REPO / "patches" / "mapush"
DEVICE_PATCHES = ("01-", "02-", "03-")


def prepare_tree(dest, pristine):
    proc = subprocess.run([sys.executable, str(STANDIN / "prepare_tree.py"), MAPUSH_SRC,
                           str(dest)] + (["--pristine"] if pristine else []),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    from tests.upstream import compiled

    return compiled(dest)


@pytest.fixture(scope="session")
def pristine(real_mqe, tmp_path_factory):
    """MAPush at the pin as upstream ships it (the stand-in body added, nothing patched)."""
    return dict(real_mqe, tree=prepare_tree(tmp_path_factory.mktemp("pristine") / "MAPush", True))


@pytest.fixture(scope="session")
def device_only(real_mqe, tmp_path_factory):
    """Upstream with patches 01-03 only: what a CPU pipeline needs to run at all."""
    tree = prepare_tree(tmp_path_factory.mktemp("device-only") / "MAPush", True)
    for patch in sorted(PATCHES.glob("*.patch")):
        if patch.name.startswith(DEVICE_PATCHES):
            subprocess.run(["patch", "-p1", "-s", "-i", str(patch)], cwd=str(tree), check=True)
    return dict(real_mqe, tree=tree)


def real_env(real, **extra):
    """Environment for a subprocess that runs the product over real MQE and the Isaac Gym
    stand-in, on the CPU (the contract of tests/standin/prepare_tree.py)."""
    env = dict(os.environ)
    env.update({
        "PYTHONPATH": os.pathsep.join(str(p) for p in (real["site"], STANDIN, real["tree"],
                                                       REPO)),
        "MAPUSH_ROOT": str(real["tree"]),
        "MAPUSH_PATCH_RECORDS": str(real["records"]),
        "PYTHONUNBUFFERED": "1",
        "CUDA_VISIBLE_DEVICES": "",
    })
    # no TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD: MQE's load of the command net goes through
    # mapush's loader (patches/mapush/13) on every torch, as a user's first run does
    env.pop("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", None)
    env.pop("MQE_DOUBLE_LOG", None)
    measured = real.get("coverage")
    if measured and str(real["tree"]) == measured["tree"]:  # the shipped tree only
        env["COVERAGE_PROCESS_START"] = measured["rc"]
        import coverage  # where this process found it (in the image: a mounted folder)

        env["PYTHONPATH"] = os.pathsep.join([str(REPO / "tests" / "coverage_hook"),
                                             env["PYTHONPATH"],
                                             os.path.dirname(os.path.dirname(coverage.__file__))])
    env.update({k: str(v) for k, v in extra.items()})
    return env


def pytest_terminal_summary(terminalreporter):
    """The count of real-MQE tests by outcome (CI's log shows it)."""
    counts = {}
    for outcome in ("passed", "failed", "skipped", "error"):
        for report in terminalreporter.stats.get(outcome, []):
            if "real_mqe" in getattr(report, "keywords", {}) and \
                    (report.when == "call" or outcome in ("skipped", "error")):
                counts[outcome] = counts.get(outcome, 0) + 1
    terminalreporter.write_line("real_mqe: %s" % (", ".join(
        "%d %s" % (n, k) for k, n in sorted(counts.items())) or "none ran"))


def double_env(upstream=None, **extra):
    """Environment for a subprocess that runs the product over the MQE double."""
    paths = [str(STANDIN), str(DOUBLES), str(REPO)]
    if upstream is not None:
        paths.insert(0, str(upstream["site"]))
    env = dict(os.environ)
    env.update({
        "PYTHONPATH": os.pathsep.join(paths),
        "MAPUSH_ROOT": str(DOUBLE_ROOT),
        "PYTHONUNBUFFERED": "1",
        "CUDA_VISIBLE_DEVICES": "",
    })
    if upstream is not None:
        env["MAPUSH_PATCH_RECORDS"] = str(upstream["records"])
    env.update({k: str(v) for k, v in extra.items()})
    return env


@contextmanager
def mqe_double_importable():
    """The double's ``mqe`` importable inside the block. After it, ``sys.path`` is as it was
    and the ``mqe`` modules imported inside are forgotten: a test worker runs many files in one
    process, and a later file must not find the double as ``mqe``."""
    before = set(sys.modules)
    added = str(DOUBLES) not in sys.path
    if added:  # first: in the image, MAPush's real mqe is installed and must not answer
        sys.path.insert(0, str(DOUBLES))
    try:
        yield
    finally:
        if added:
            sys.path.remove(str(DOUBLES))
        for name in set(sys.modules) - before:
            if name == "mqe" or name.startswith("mqe."):
                del sys.modules[name]


def double_config(obj):
    """The double's ``Go1PushMidCfg`` of ``obj``, loaded as the product loads it (its
    ``from mqe.envs.go1.go1 import Go1Cfg`` finds the double's mqe, which imports nothing
    heavy)."""
    from mapush.sim import load_object_config

    with mqe_double_importable():
        return load_object_config(obj, DOUBLE_ROOT)


def run_mapush(args, env, cwd=None, timeout=600):
    """``python -m mapush ARGS`` in a subprocess; returns the CompletedProcess."""
    return subprocess.run([sys.executable, "-m", "mapush"] + [str(a) for a in args], env=env,
                          cwd=str(cwd) if cwd else None, capture_output=True, text=True,
                          timeout=timeout)


def one_error(proc):
    """The one ``error:`` line of a refused command (exit status 2)."""
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and len(errors) == 1, proc.stderr[-3000:]
    return errors[0]


def double_log(path):
    """The JSON lines ``MQE_DOUBLE_LOG`` wrote, one per env created ([] when none was)."""
    path = Path(path)
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() \
        else []


def tree_hash(root):
    """sha256 over every path (files and folders, caches included) and file under root:
    proves a tree was not written to."""
    digest = hashlib.sha256()
    for path in sorted(Path(root).rglob("*")):
        digest.update(str(path.relative_to(root)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


# -- faults: a real read-only or full file system (#50) -----------------------------------
def namespace_ok():
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


needs_mounts = pytest.mark.skipif(not namespace_ok(), reason="needs root and a mount "
                                  "namespace (unshare -m) for a real read-only or full file "
                                  "system; CI runs as root")


def in_namespace(script, env, cwd):
    """``script`` (bash) in a private mount namespace, so its mounts vanish with it."""
    return subprocess.run(["unshare", "-m", "bash", "-euc", script], env=env, cwd=str(cwd),
                          capture_output=True, text=True, timeout=600)


@pytest.fixture
def one_thread_each(monkeypatch):
    """Every process of a ranks test the same threads (tests/test_openrl_ranks.py,
    tests/test_harl_ranks.py): the launcher would give one process all the cores and each of
    N ranks 1/N of them, and CPU sums split over other threads round otherwise (by 1.6e-5
    after HAPPO's update, Adam amplifying the smallest gradients)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
