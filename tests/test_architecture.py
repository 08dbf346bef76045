"""The code's one way through (docs/architecture.md): one module installs signal handlers,
one registry names the algorithms, no JUnit of our own, the smoke stages travel in the image."""
import ast
import re
from pathlib import Path

import pytest

from mapush import trainers
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
    assert spelled == ["mapush/trainers/__init__.py", "mapush/trainers/harl_trainer.py"]


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
        path = REPO / (trainer.module.replace(".", "/") + ".py")
        names = {n.name for n in ast.parse(path.read_text()).body
                 if isinstance(n, ast.FunctionDef)}
        assert {"train", "planned_updates", "load_policy"} <= names, trainer.module


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
            self.stderr = io.StringIO("loading\nmapush-progress 3 8\nmapush-progress 8 8\n"
                                      "error-free last line\n")
            self.stdout = io.StringIO('noise\n{"success_rate": 0.5}\n')

        def wait(self):
            return 0

    monkeypatch.setattr(subprocess, "Popen", FakeChild)
    info = {"checkpoint": "/x/ck", "algo": "ppo", "task": "go1push_mid", "object": "cuboid",
            "step": 7, "trained_task": "go1push_mid"}
    args = argparse.Namespace(num_envs=8, sim_device="cpu", rl_device="cpu", seed=0)
    progress = []
    code, result, last = evaluate.evaluate(info, args, lambda d, t: progress.append((d, t)),
                                           echo=True)
    assert seen["argv"][1:3] == ["-m", "mapush.eval.calculator"]
    assert seen["spec"] == EvalSpec(checkpoint="/x/ck", algo="ppo", task="go1push_mid",
                                    object="cuboid", num_envs=8, seed=0, sim_device="cpu",
                                    rl_device="cpu", step=7, progress=True).to_dict()
    assert not Path(seen["argv"][-1]).exists()  # the spec file is the child's, removed after
    assert (code, result, last) == (0, {"success_rate": 0.5}, "error-free last line")
    assert progress == [(3, 8), (8, 8)]
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
