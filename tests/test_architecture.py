"""The code's one way through (docs/architecture.md): one module installs signal handlers,
one registry names the algorithms, no JUnit of our own, the smoke stages travel in the image."""
import ast
import os
import subprocess
import sys
import re
from pathlib import Path

import pytest

from mapush import registry as trainers
from mapush.errors import UsageError
from tests.conftest import REPO

PACKAGE = REPO / "mapush"


def _sources():
    return {p.relative_to(REPO).as_posix(): p.read_text() for p in sorted(PACKAGE.rglob("*.py"))}


def _string_constants(text):
    return {node.value for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def test_signal_handlers_are_installed_in_one_module_at_two_sites():
    sites = {path: text.count("signal.signal(") for path, text in _sources().items()
             if "signal.signal(" in text}
    assert sites == {"mapush/proc.py": 2}


def test_no_junit_is_written_by_mapush_itself():
    for path, text in _sources().items():
        assert "xml.etree" not in text and "ElementTree" not in text, path


def test_the_algorithm_names_are_spelled_out_in_at_most_two_modules():
    spelled = sorted(path for path, text in _sources().items()
                     if set(trainers.ALGOS) & _string_constants(text))
    assert spelled == ["mapush/registry.py", "mapush/trainers/harl_trainer.py"]


def test_the_registry_answers_which_library_trains_an_algorithm():
    assert trainers.DEFAULT_ALGO == "ppo"
    assert trainers.for_algo("ppo").library == "openrl"
    assert {trainers.for_algo(a).library for a in ("happo", "mappo", "hatrpo")} == {"harl"}
    assert trainers.for_algo("happo").teams and not trainers.for_algo("ppo").teams
    with pytest.raises(UsageError, match="--algo sac: not one of ppo, happo, mappo, hatrpo"):
        trainers.for_algo("sac")
    # each algorithm has its shipped config, and its update length is read from it
    for algo in trainers.ALGOS:
        assert (trainers.CONFIG_DIR / ("%s.yaml" % algo)).is_file()
    assert trainers.episode_length("ppo") == 200
    # every trainer module has what the registry promises (read, not imported: no torch)
    for trainer in trainers.TRAINERS:
        for module, promised in ((trainer.module, {"train", "load_policy"}),
                                 (trainer.checks or trainer.module,
                                  {"planned_updates", "resolved_config"})):
            path = REPO / (module.replace(".", "/") + ".py")
            body = ast.parse(path.read_text()).body
            names = {n.name for n in body if isinstance(n, ast.FunctionDef)} | {
                t.id for n in body if isinstance(n, ast.Assign) for t in n.targets
                if isinstance(t, ast.Name)}
            assert promised <= names, module


def test_the_parents_checks_import_no_torch(tmp_path):
    """mapush train's parent checks the trainer's config (trainers.load(algo, checks=True))
    without torch or a training library's stack: importing them cost every train about 6 s."""
    from tests.upstream import build_patched_site

    site = build_patched_site(tmp_path)["site"]
    script = ("import sys\nfrom mapush import registry as trainers\nfor algo in trainers.ALGOS:\n"
              "    trainers.load(algo, checks=True)\n"
              "print(sorted(m for m in ('torch', 'openrl.drivers', 'harl.runners') "
              "if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(site),
                                                                         str(REPO)])),
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split("\n")[-2] == "[]"


def test_the_smoke_stages_travel_in_the_image_with_their_runner():
    dockerfile = (REPO / "docker" / "Dockerfile").read_text()
    assert "COPY tests/gpu/ /opt/mapush-env/tests/gpu/" in dockerfile
    assert "COPY tests/__init__.py /opt/mapush-env/tests/__init__.py" in dockerfile
    assert re.search(r"^ENV MAPUSH_SMOKE_TESTS=/opt/mapush-env/tests/gpu$", dockerfile, re.M)
    allowed = (REPO / ".dockerignore").read_text().splitlines()
    assert "!tests/gpu/" in allowed and "!tests/__init__.py" in allowed
    for lock in ("requirements.lock", "requirements-cu121.lock"):
        pins = (REPO / "env" / lock).read_text()
        for name in ("pytest", "pytest-timeout"):
            assert re.search(r"^%s==" % re.escape(name), pins, re.M), (lock, name)


def test_the_eval_child_gets_an_eval_spec_file_and_its_progress_is_read(monkeypatch, capsys):
    import argparse
    import io
    import json
    import subprocess

    from mapush import eval as evaluate
    from mapush.spec import EvalSpec

    seen = {}

    class FakeChild(object):
        def __init__(self, argv, **_kw):
            seen["argv"] = argv
            seen["spec"] = json.loads(Path(argv[-1]).read_text())
            self.stderr = io.StringIO("loading\nmapush-progress 3 8 10 501\n"
                                      "mapush-progress 8 8 20 501\n"
                                      "error-free last line\n")
            self.stdout = io.StringIO('noise\n{"success_rate": 0.5}\n')

        def wait(self, timeout=None):
            return 0

        def poll(self):
            return 0

        def kill(self):  # evaluate's cleanup, which does nothing to a child that has ended
            pass

    monkeypatch.setattr(subprocess, "Popen", FakeChild)
    info = {"checkpoint": "/x/ck", "algo": "ppo", "task": "go1push_mid", "object": "cuboid",
            "step": 7, "trained_task": "go1push_mid"}
    args = argparse.Namespace(num_envs=8, sim_device="cpu", rl_device="cpu", seed=0)
    progress = []
    code, result, last = evaluate.evaluate(info, args, lambda *p: progress.append(p),
                                           echo=True)
    assert seen["argv"][1:3] == ["-m", "mapush.eval.calculator"]
    assert seen["spec"] == EvalSpec(checkpoint="/x/ck", algo="ppo", task="go1push_mid",
                                    object="cuboid", num_envs=8, seed=0, sim_device="cpu",
                                    rl_device="cpu", scratch=seen["spec"]["scratch"], step=7,
                                    progress=True).to_dict()
    assert Path(seen["spec"]["scratch"]).parent == Path(seen["argv"][-1]).parent
    assert not Path(seen["argv"][-1]).parent.exists()  # the parent's folder, removed after
    assert (code, result, last) == (0, {"success_rate": 0.5}, "error-free last line")
    assert progress == [(3, 8, 10, 501), (8, 8, 20, 501)]  # envs done, of, step, of
    err = capsys.readouterr().err
    assert "loading" in err and "mapush-progress" not in err


@pytest.mark.parametrize("command", ["pipeline", "sweep", "reproduce"])
def test_commands_that_train_or_evaluate_pass_spec_files_not_argv(command):
    """pipeline, sweep and reproduce start training by ``mapush train --spec FILE`` and
    evaluate by calling mapush.eval: no option of ``mapush train`` or ``mapush eval`` is
    spelled in them but those they take themselves."""
    from mapush.cli import build_parser

    choices = build_parser()._subparsers._group_actions[0].choices

    def options(name):
        return {o for a in choices[name]._actions for o in a.option_strings}

    foreign = (options("train") | options("eval")) - options(command) - {"--spec", "-h"}
    text = (PACKAGE / ("%s.py" % command)).read_text()
    assert not foreign & _string_constants(text)
    if command != "reproduce":
        assert "--spec" in _string_constants(text)


# -- the layers (docs/architecture.md, "The layers of mapush/") ---------------------------
ARCHITECTURE = REPO / "docs" / "architecture.md"


def declared_layers(text):
    """``[(layer number, [module pattern, ...]), ...]`` from the layers table."""
    section = text.split("## The layers of `mapush/`", 1)[1].split("\n## ", 1)[0]
    layers = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and re.match(r"^\d+ ", cells[0]):
            layers.append((int(cells[0].split()[0]), re.findall(r"`([\w.*]+)`", cells[1])))
    return layers


def module_names(package):
    """``{dotted module name: path}`` of every module under ``package`` (its folder)."""
    names = {}
    for path in sorted(Path(package).rglob("*.py")):
        parts = list(path.relative_to(Path(package).parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def imports_of(package):
    """``[(importer, imported, file, line)]``: every import of a module of ``package`` by
    one of its modules, lazy ones inside functions included; ``from a import b`` names
    ``a.b`` where that is a module."""
    names = module_names(package)
    root = Path(package).name
    found = []
    for name, path in names.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = name.split(".") if is_package else name.split(".")[:-1]
                    here = here[:len(here) - node.level + 1]
                    base = ".".join(here + ([base] if base else []))
                targets = [base + "." + a.name if base + "." + a.name in names else base
                           for a in node.names]
            for target in targets:
                while target and target not in names:
                    target = target.rpartition(".")[0]
                if target and target.split(".")[0] == root and target != name:
                    found.append((name, target, path, node.lineno))
    return found


def layer_of(layers, module):
    for number, patterns in layers:
        for pattern in patterns:
            if module == pattern or (pattern.endswith(".*") and (
                    module == pattern[:-2] or module.startswith(pattern[:-1]))):
                return number
    return None


def cycles(edges):
    """Each import cycle as a list of modules (Tarjan's strongly connected components)."""
    graph = {}
    for importer, imported, _path, _line in edges:
        graph.setdefault(importer, set()).add(imported)
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def layer_problems(package, layers, entry="mapush.__main__", cli="mapush.cli"):
    """Every breach of the layers in ``package``, one line each, naming file and line."""
    edges = imports_of(package)
    where = {(a, b): "%s:%d" % (p.relative_to(Path(package).parent), n)
             for a, b, p, n in edges}
    problems = []
    for name in module_names(package):
        if layer_of(layers, name) is None:
            problems.append("%s is in no layer of docs/architecture.md" % name)
    for component in cycles(edges):
        links = ["%s -> %s (%s)" % (a, b, where[(a, b)]) for a in component for b in component
                 if (a, b) in where]
        problems.append("import cycle: %s" % "; ".join(links))
    for importer, imported, path, line in edges:
        here, there = layer_of(layers, importer), layer_of(layers, imported)
        if imported == cli and importer != entry:
            problems.append("%s:%d: %s imports the CLI (only %s may)"
                            % (path.relative_to(Path(package).parent), line, importer, entry))
        elif here is not None and there is not None and there > here:
            problems.append("%s:%d: %s (layer %d) imports %s (layer %d), a layer above"
                            % (path.relative_to(Path(package).parent), line, importer, here,
                               imported, there))
    return problems


def test_mapush_keeps_its_layers():
    layers = declared_layers(ARCHITECTURE.read_text())
    assert [n for n, _ in layers] == list(range(8))
    assert layer_problems(PACKAGE, layers) == []


def test_only_the_entry_point_imports_the_cli():
    importers = {a for a, b, _p, _n in imports_of(PACKAGE) if b == "mapush.cli"}
    assert importers == {"mapush.__main__"}


def test_the_layer_check_fails_on_a_planted_cycle_an_upward_import_and_a_cli_import(tmp_path):
    """A copy of mapush/ with three planted breaches: each is named, with its file and line."""
    import shutil

    copy = tmp_path / "mapush"
    shutil.copytree(str(PACKAGE), str(copy), ignore=shutil.ignore_patterns("__pycache__"))
    layers = declared_layers(ARCHITECTURE.read_text())
    assert layer_problems(copy, layers) == []
    with open(str(copy / "errors.py"), "a") as handle:  # layer 0 -> 0, and back: a cycle
        handle.write("\n\ndef _planted():\n    from mapush import pins  # noqa\n")
    with open(str(copy / "pins.py"), "a") as handle:
        handle.write("\nfrom mapush.errors import UsageError as _Planted  # noqa\n")
    with open(str(copy / "spec.py"), "a") as handle:  # layer 1 -> layer 5, lazily
        handle.write("\n\ndef _planted():\n    import mapush.report  # noqa\n")
    with open(str(copy / "sweep.py"), "a") as handle:  # a command importing the CLI
        handle.write("\nfrom mapush.cli import main as _planted  # noqa\n")
    (copy / "newmodule.py").write_text('"""placed in no layer"""\n')
    problems = layer_problems(copy, layers)
    text = "\n".join(problems)
    assert "import cycle: " in text and "mapush.errors -> mapush.pins (mapush/errors.py:" \
        in text and "mapush.pins -> mapush.errors (mapush/pins.py:" in text, text
    spec_lines = len((copy / "spec.py").read_text().splitlines())
    assert ("mapush/spec.py:%d: mapush.spec (layer 1) imports mapush.report (layer 5), a "
            "layer above" % spec_lines) in problems, text
    sweep_lines = len((copy / "sweep.py").read_text().splitlines())
    assert "mapush/sweep.py:%d: mapush.sweep imports the CLI (only mapush.__main__ may)" \
        % sweep_lines in problems, text
    assert "mapush.newmodule is in no layer of docs/architecture.md" in problems


def test_mapush_stays_within_its_budget_of_counted_lines():
    """Issue 78's count (tests/line_count.py): code lines of mapush/ (no docstrings, comments
    or blanks) plus its YAML and templates, at most 7,500; the patch series' added lines are
    printed beside it (python -m tests.line_count; .ci/run prints the line)."""
    from tests import line_count

    found = line_count.counts()
    assert found["total"] <= line_count.BUDGET, line_count.line(found)
    assert found["patches_added"] > 1000  # the series is read (a wrong glob would read none)


def test_the_line_count_skips_docstrings_comments_and_blanks(tmp_path):
    source = ('"""A module\ndocstring."""\n\n# a comment\nX = 1  # code\n\n\ndef f():\n'
              '    """Its docstring."""\n    return """a string\n    that is code"""\n')
    from tests import line_count

    assert line_count.code_lines(source) == 4  # X = 1, def f, return and the string's 2nd line
    (tmp_path / "pkg" / "templates").mkdir(parents=True)
    (tmp_path / "pkg" / "a.py").write_text(source)
    (tmp_path / "pkg" / "a.yaml").write_text("# comment\n\nkey: 1\nother: [2]\n")
    (tmp_path / "pkg" / "templates" / "t.html").write_text("<p>\n\n</p>\n")
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "x.patch").write_text("+++ b/f\n+new\n-old\n context\n+two\n")
    assert line_count.counts(tmp_path / "pkg", tmp_path / "patches") == {
        "python": 4, "data": 4, "total": 8, "patches_added": 2}


def test_the_faults_marker_selects_every_fault_of_issue_36():
    """``pytest -m faults`` is the fault suite: kill -9 of the parent and of the child,
    SIGTERM in training and in eval, damaged checkpoints (PPO and HARL) and records, a full
    disk, a read-only folder, two writers."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                          "--collect-only", "-q", "-m", "faults", "tests"], cwd=str(REPO),
                         capture_output=True, text=True, timeout=300).stdout
    names = " ".join(line for line in out.splitlines() if "::" in line)
    for needle in ("sigkill_of_the_parent", "sigkill_of_the_child_again", "sigkill_mid_write",
                   "sigterm_checkpoints", "sigterm_during_eval", "corrupt_checkpoint",
                   "damaged_harl_checkpoint", "truncated_record", "wrong_type",
                   "full_disk_loses_nothing", "read_only_run_folder", "one_writer_per_run"):
        assert needle in names, needle
