"""Loading a checkpoint executes nothing (mapush/checkpoints/unpickle.py): a file that asks
its unpickler for anything but what OpenRL's, HARL's and MAPush's checkpoints hold is refused
with one line at every way in (eval, export, --init-from, --command-net, --resume, a HARL
checkpoint), on this torch and the image's 1.13 (make test-stack), and the payload never
runs; the authors' published checkpoints need nothing outside the allowlist."""
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mapush.checkpoints import unpickle
from mapush.errors import UsageError
from tests.conftest import DOUBLE_ROOT, double_env, one_error, run_mapush

pytestmark = pytest.mark.security


class Payload(object):
    """Unpickling it would run ``touch MARKER``: os.system, as a pickle names it."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, ("touch %s" % self.marker,)


def payload_file(path, marker, legacy=False):
    path.parent.mkdir(parents=True, exist_ok=True)
    obj = {"models": {"policy": torch.nn.Linear(2, 2)}, "x": Payload(marker)}
    torch.save(obj, str(path), _use_new_zipfile_serialization=not legacy)
    return path


@pytest.mark.parametrize("legacy", [False, True])
def test_the_loader_refuses_a_payload_before_it_runs(tmp_path, legacy):
    marker = tmp_path / "ran"
    path = payload_file(tmp_path / "module.pt", marker, legacy)
    with pytest.raises(UsageError) as info:
        unpickle.load(path, "cpu", "--checkpoint")
    assert "refused to load it: it asks for posix.system" in str(info.value)
    assert not marker.exists()
    # the same file through plain pickle would have run it: the test's payload is live
    assert not marker.exists()
    for lenient in (None, lambda module, name: object):
        with pytest.raises(UsageError):
            unpickle.load(path, "cpu", "x", stand_in=lenient)
    assert not marker.exists()


def test_what_checkpoints_hold_loads(tmp_path):
    state = {"weight": torch.ones(2, 2), "step": 3, "betas": (0.9, 0.99)}
    for legacy in (False, True):
        path = tmp_path / ("state%d.pt" % legacy)
        torch.save({"sd": torch.nn.Linear(2, 3).state_dict(), "opt": state}, str(path),
                   _use_new_zipfile_serialization=not legacy)
        loaded = unpickle.load(path, "cpu", "--checkpoint")
        assert loaded["sd"]["weight"].shape == (3, 2) and loaded["opt"]["betas"] == (0.9, 0.99)


def test_the_payload_is_live_without_the_allowlist(tmp_path):
    """The control: plain unpickling runs it (so the refusals above mean something)."""
    marker = tmp_path / "ran"
    path = payload_file(tmp_path / "module.pt", marker)
    code = ("import torch, inspect, sys; kw = {'weights_only': False} if 'weights_only' in "
            "inspect.signature(torch.load).parameters else {}; torch.load(sys.argv[1], **kw)")
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, timeout=120)
    assert marker.exists()


MARK = "TORCHSCRIPT-PAYLOAD-RAN"


def torchscript_file(path):
    """A TorchScript archive whose scripted ``__setstate__`` prints MARK when it is loaded:
    torch.load hands such a zip to torch.jit.load, which runs it (the control below)."""
    from typing import Tuple

    class Evil(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.x = 1

        def forward(self, x):
            return x

        @torch.jit.export
        def __getstate__(self) -> Tuple[int, bool]:
            return (self.x, self.training)

        @torch.jit.export
        def __setstate__(self, state: Tuple[int, bool]) -> None:
            print("TORCHSCRIPT-PAYLOAD-RAN")
            self.x = state[0]
            self.training = state[1]

    path.parent.mkdir(parents=True, exist_ok=True)
    torch.jit.save(torch.jit.script(Evil()), str(path))
    return path


def _python(code, *args):
    return subprocess.run([sys.executable, "-c", code] + [str(a) for a in args],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120)


def test_a_torchscript_archive_is_refused_before_any_torch_call(tmp_path):
    path = torchscript_file(tmp_path / "module.pt")
    proc = _python("import sys; from mapush.checkpoints import unpickle\n"
                   "try:\n    unpickle.load(sys.argv[1], 'cpu', '--checkpoint')\n"
                   "except Exception as exc:\n    print('refused:', exc, file=sys.stderr)", path)
    assert MARK not in proc.stdout + proc.stderr
    assert "a TorchScript file, not a checkpoint" in proc.stderr, proc.stderr[-2000:]
    # the control: torch's own loaders run it (on 1.13 and 2.x alike)
    control = _python("import sys, torch; torch.jit.load(sys.argv[1])", path)
    assert MARK in control.stdout, control.stderr[-2000:]


def test_eval_refuses_a_torchscript_checkpoint_with_one_line(tmp_path):
    ckpt = tmp_path / "bad" / "checkpoints" / "rl_model_40_steps"
    torchscript_file(ckpt / "module.pt")
    proc = run_mapush(["eval", "--checkpoint", ckpt, "--object", "cuboid", "--sim-device",
                       "cpu", "--rl-device", "cpu"], env=double_env(), cwd=tmp_path)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and MARK not in proc.stdout + proc.stderr, proc.stderr[-2000:]
    assert lines[-1].startswith("error: ") and "a TorchScript file" in lines[-1], lines[-3:]


def test_a_fifo_named_as_a_checkpoint_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "module.pt"
    os.mkfifo(str(fifo))
    with pytest.raises(OSError):
        unpickle.load(fifo, "cpu", "--checkpoint")


def _harl_run(tmp_path, marker):
    ckpt = tmp_path / "harlrun" / "checkpoints" / "step-000000000040"
    payload_file(ckpt / "actor_agent0.pt", marker)
    (tmp_path / "harlrun" / "harl_config.json").write_text("{}")
    return ckpt


@pytest.mark.parametrize("way", ["eval", "eval_harl", "export", "init_from", "command_net"])
def test_every_way_in_refuses_a_payload_checkpoint(tmp_path, way):
    marker = tmp_path / "ran"
    ckpt = tmp_path / "bad" / "checkpoints" / "rl_model_40_steps"
    payload_file(ckpt / "module.pt", marker)
    argv = {
        "eval": ["eval", "--checkpoint", ckpt, "--object", "cuboid", "--sim-device", "cpu",
                 "--rl-device", "cpu"],
        "eval_harl": ["eval", "--checkpoint", _harl_run(tmp_path, marker), "--object",
                      "cuboid", "--sim-device", "cpu", "--rl-device", "cpu"],
        "export": ["export", "--checkpoint", ckpt / "module.pt", "--out", tmp_path / "exp"],
        "init_from": ["train", "--init-from", ckpt, "--object", "cuboid", "--sim-device",
                      "cpu", "--rl-device",
                      "cpu", "--run-dir", tmp_path / "run"],
        "command_net": ["train", "--task", "go1push_upper", "--command-net", ckpt / "module.pt",
                        "--sim-device", "cpu", "--rl-device", "cpu", "--run-dir",
                        tmp_path / "run"],
    }[way]
    proc = run_mapush(argv, env=double_env(), cwd=tmp_path)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert lines[-1].startswith("error: ") and "refused to load it" in lines[-1], lines[-3:]
    assert "posix.system" in lines[-1]
    assert not marker.exists()
    assert not (tmp_path / "run").exists() and not (tmp_path / "exp").exists()


def test_the_authors_checkpoints_need_nothing_outside_the_allowlist(monkeypatch):
    """Every name the published checkpoints ask for (MAPush's results/, its command and goal
    nets), recorded with the allowlist open, is in it; then each loads through it."""
    root = Path(os.environ.get("MAPUSH_SRC") or DOUBLE_ROOT)
    # (resources/actuator_nets/ hold TorchScript archives, not checkpoints)
    files = sorted(root.glob("results/*/checkpoints/*/module.pt"))[::10] + \
        sorted(root.glob("resources/command_nets/*.pt")) + \
        sorted(root.glob("resources/goals_net/*.pt"))
    if not files:
        pytest.skip("no MAPush tree with the authors' checkpoints (MAPUSH_SRC)")

    def stand_in(module, name):
        return type(name, (object,), {"__init__": lambda self, *a, **k: None,
                                      "__setstate__": lambda self, state: None})

    asked = set()
    allowed = unpickle.allowed
    with monkeypatch.context() as patched:
        patched.setattr(unpickle, "allowed", lambda m, n: asked.add((m, n)) or True)
        for file in files:
            unpickle.load(file, "cpu", "--checkpoint", stand_in=stand_in)
    assert ("openrl.modules.ppo_module", "PPOModule") in asked
    assert not [name for name in asked if not allowed(*name)]
    for file in files:
        assert unpickle.load(file, "cpu", "--checkpoint", stand_in=stand_in) is not None


def test_resume_refuses_a_payload_put_in_the_runs_checkpoint(upstream, tmp_path):
    """--resume: the training child loads the newest checkpoint; one swapped for a payload
    (its meta.json updated to match, as someone who swapped it would) is refused there."""
    from mapush.checkpoints.store import META, file_digest, latest_checkpoint
    from tests.test_stop_resume import CONFIGS, PER_UPDATE

    import json

    config = tmp_path / "small.yaml"
    config.write_text(CONFIGS["ppo"])
    run_dir = tmp_path / "run"
    common = ["--algo", "ppo", "--num-envs", "8", "--sim-device", "cpu", "--rl-device", "cpu",
              "--config", config]
    first = run_mapush(["train"] + common + ["--steps", PER_UPDATE, "--run-dir", run_dir],
                       env=double_env(upstream), timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    step, path, meta = latest_checkpoint(run_dir)
    marker = tmp_path / "ran"
    payload_file(path / "module.pt", marker)
    meta["files"]["module.pt"] = file_digest(path / "module.pt")
    (path / META).write_text(json.dumps(meta))
    record = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    out = run_mapush(["train"] + common + ["--steps", 2 * PER_UPDATE, "--resume", run_dir],
                     env=double_env(upstream), timeout=300)
    line = one_error(out)
    assert "refused to load it: it asks for posix.system" in line
    assert not marker.exists()
    assert latest_checkpoint(run_dir)[0] == step  # nothing trained on
    # the refusal came before the record changed: the run is still done, not crashed
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == record
    listed = run_mapush(["runs", tmp_path], env=double_env(upstream), timeout=60)
    assert " done " in listed.stdout and "crashed" not in listed.stdout, listed.stdout


class _Storage(object):
    """Pickled by :func:`forged_file` as a storage that declares ``numel`` floats."""


def forged_file(path, numel, legacy):
    """A checkpoint of a few hundred bytes whose one storage declares ``numel`` floats,
    written as torch's legacy stream or as its zip (torch/serialization.py: ``_save``,
    ``_legacy_save``), by hand: torch.save writes only what a tensor holds."""
    import io
    import struct
    import zipfile
    from torch.serialization import MAGIC_NUMBER, PROTOCOL_VERSION
    mark = _Storage()
    pid = ("storage", torch.FloatStorage, "0", "cpu", numel) + ((None,) if legacy else ())

    class Forger(pickle.Pickler):
        def persistent_id(self, obj):
            return pid if obj is mark else None

    objects = io.BytesIO()
    Forger(objects, protocol=2).dump({"x": mark})
    out = io.BytesIO()
    if legacy:
        for header in (MAGIC_NUMBER, PROTOCOL_VERSION,
                       {"protocol_version": PROTOCOL_VERSION, "little_endian": True,
                        "type_sizes": {"short": 2, "int": 4, "long": 4}}):
            pickle.dump(header, out, protocol=2)
        out.write(objects.getvalue())
        pickle.dump(["0"], out, protocol=2)
        out.write(struct.pack("<q", 2) + b"\0" * 8)
    else:
        with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
            archive.writestr("archive/data.pkl", objects.getvalue())
            archive.writestr("archive/data/0", b"\0" * 8)
            archive.writestr("archive/version", "3\n")
    path.write_bytes(out.getvalue())
    return path


@pytest.mark.parametrize("legacy", [False, True])
def test_the_loaders_memory_is_bounded_by_the_files_size(tmp_path, legacy):
    """A file of a few hundred bytes that declares 4 TB of tensors is refused before any torch
    call; one that declares what it holds loads. Control: torch's own loader of the legacy
    format tries to allocate all of it (the zip's record-size check is torch's, on 2.x)."""
    huge = forged_file(tmp_path / "huge.pt", 1 << 40, legacy)
    assert huge.stat().st_size < 1000
    with pytest.raises(UsageError, match="declares 4398046511104 bytes of tensors in a file"):
        unpickle.load(huge, "cpu", "--checkpoint")
    fair = forged_file(tmp_path / "fair.pt", 2, legacy)
    assert unpickle.load(fair, "cpu", "--checkpoint")["x"].size() == 2
    if legacy:
        with pytest.raises((RuntimeError, MemoryError), match="allocate"):
            torch.load(str(huge), pickle_module=pickle, **(
                {"weights_only": False} if int(torch.__version__[0]) >= 2 else {}))


def test_a_compressed_archive_is_refused(tmp_path):
    """torch.save writes stored records only; a deflated one could unpack beyond the file."""
    import zipfile
    plain = forged_file(tmp_path / "plain.pt", 2, legacy=False)
    packed = tmp_path / "packed.pt"
    with zipfile.ZipFile(str(plain)) as src, \
            zipfile.ZipFile(str(packed), "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info))
    with pytest.raises(UsageError, match="compressed records"):
        unpickle.load(packed, "cpu", "--checkpoint")
