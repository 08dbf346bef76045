"""``mapush export``: the authors' published checkpoints, the high level's goals net and its
command net, and PPO and HAPPO checkpoints trained here, each exported as TorchScript and
ONNX on a host without Isaac Gym; the files loaded back in a process that cannot import
mapush, openrl, harl, gym or isaacgym, and their actions compared with the checkpoint's own
deterministic ``act``; ``policy.json``'s layout checked line by line against MAPush at the
pin; bad input refused before anything is written."""
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.conftest import MAPUSH_SRC, NO_SRC, REPO, double_env, one_error, run_mapush

LAYOUT = REPO / "mapush" / "export_layout.yaml"
CPU = ["--sim-device", "cpu", "--rl-device", "cpu"]
needs_src = pytest.mark.skipif(not MAPUSH_SRC, reason=NO_SRC)
# (checkpoint under MAPush, obs dim, object, agents, task)
PUBLISHED = [
    ("results/10-15-23_cuboid", 8, "cuboid", 2, "go1push_mid"),
    ("results/10-15-23_Tblock", 8, "Tblock", 2, "go1push_mid"),
    ("results/10-15-23_cylinder", 11, "cylinder", 3, "go1push_mid"),
    ("resources/goals_net/example.pt", 26, "cuboid", 2, "go1push_upper"),
    ("resources/command_nets/1.2x1.2.pt", 8, None, 2, "go1push_mid"),
]
BLOCKED = ("mapush", "openrl", "harl", "gym", "isaacgym")
# Loads the exported files with torch and onnxruntime only: any import of a blocked package
# raises, and none may be loaded at the end.
STANDALONE = r"""
import json, sys
import numpy as np
BLOCKED = %r
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Block())
import torch, onnxruntime
obs = np.load(sys.argv[2])
out = {}
for stem in sys.argv[3:]:
    out[stem + ".pt"] = torch.jit.load(sys.argv[1] + "/" + stem + ".pt")(
        torch.from_numpy(obs)).detach().numpy().tolist()
    session = onnxruntime.InferenceSession(sys.argv[1] + "/" + stem + ".onnx",
                                           providers=["CPUExecutionProvider"])
    out[stem + ".onnx"] = session.run(None, {"obs": obs})[0].tolist()
assert not [m for m in sys.modules if m.split(".")[0] in BLOCKED], sys.modules
print(json.dumps(out))
"""


def host_env(upstream, root):
    """A host without Isaac Gym: the patched openrl and harl, this checkout, no stand-in."""
    env = double_env(upstream, MAPUSH_ROOT=root)
    env["PYTHONPATH"] = "%s:%s" % (upstream["site"], REPO)
    return env


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def reference(checkpoint, obs, upstream):
    """The checkpoint's own deterministic actions, through OpenRL's or HARL's ``act``."""
    script = r"""
import json, sys
import numpy as np
import torch as export_torch
from mapush import export
from mapush.checkpoints.policy import kind, module_path
path = export.Path(sys.argv[1])
nets = export._harl(path) if kind(path) == "harl" else [export._openrl(module_path(path))]
obs = np.load(sys.argv[2])
with export_torch.no_grad():
    print(json.dumps([np.asarray(ref(obs)).tolist() for _, ref in nets]))
"""
    proc = subprocess.run([sys.executable, "-c", script, str(checkpoint), str(obs)],
                          env=host_env(upstream, MAPUSH_SRC or REPO), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [np.array(a, np.float32) for a in json.loads(proc.stdout.strip().splitlines()[-1])]


def check_export(out, checkpoint, obs_dim, stems, upstream, tmp_path):
    """Every exported file: recorded with its sha256 and parity, loaded standalone, and
    equal to the checkpoint's own actions on observations the export never saw."""
    record = json.loads((out / "policy.json").read_text())
    for stem in stems:
        network = record["networks"][stem]
        assert sorted(network["files"]) == [stem + ".onnx", stem + ".pt"]
        for name, entry in network["files"].items():
            assert entry["sha256"] == sha256(out / name)
            assert isinstance(entry["max_abs_error"], float)
        assert network["parity"]["observations"] == 1000
        assert network["parity"]["tolerance"] == "|a - b| <= 1e-05 * (1 + max |b| of its row)"
        assert network["parity"]["rollout"] == (
            "the upper wrapper keeps the command net's observations inside"
            if stem == "command_net" else "no simulation here (Isaac Gym is not installed)")
    obs = np.random.RandomState(7).uniform(-3, 3, (64, obs_dim)).astype(np.float32)
    np.save(str(tmp_path / "obs.npy"), obs)
    proc = subprocess.run([sys.executable, "-I", "-c", STANDALONE % (BLOCKED,), str(out),
                           str(tmp_path / "obs.npy")] + list(stems[:1]),
                          capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    expected = reference(checkpoint, tmp_path / "obs.npy", upstream)[0]
    for name in (stems[0] + ".pt", stems[0] + ".onnx"):
        np.testing.assert_allclose(np.array(loaded[name]), expected, rtol=1e-5, atol=1e-5)
    return record


# -- the layout, read off MAPush at the pin ---------------------------------------------
def _sources(node):
    if isinstance(node, dict):
        if "cite" in node and "holds" in node:
            yield node["cite"], node["holds"]
        for value in node.values():
            yield from _sources(value)
    elif isinstance(node, list):
        for value in node:
            yield from _sources(value)


@needs_src
def test_every_cited_line_holds_what_the_layout_says():
    layout = yaml.safe_load(LAYOUT.read_text())
    cited = list(_sources(layout))
    assert len(cited) >= 12
    for cite, holds in cited:
        file, line = cite.rsplit(":", 1)
        text = (Path(MAPUSH_SRC) / file).read_text().splitlines()[int(line) - 1]
        assert holds in text, (cite, holds, text)
    for row in layout["locomotion"]["frame"]:  # each slice of walk-these-ways' observation
        file, line = row["source"].rsplit(":", 1)
        text = (Path(MAPUSH_SRC) / file).read_text().splitlines()[int(line) - 1]
        assert "locomotion_obs[:, " in text, row
    assert [r["slice"] for r in layout["locomotion"]["frame"]][-1][1] * 30 == 2100


def test_the_mid_layout_has_one_row_per_observation():
    from mapush.export import layout

    for agents in (2, 3):
        rows = layout("go1push_mid", 2 + 3 * agents)["observation"]
        assert len(rows) == 2 + 3 * agents
        assert rows[5]["name"] == "other1_x" and rows[-1]["name"] == "other%d_yaw" % (agents - 1)
    assert len(layout("go1push_upper", 26)["observation"]) == 26


# -- the authors' checkpoints, the goals net and the command net ------------------------
@needs_src
@pytest.mark.parametrize("rel, obs_dim, obj, agents, task", PUBLISHED,
                         ids=[p[0].split("/")[-1] for p in PUBLISHED])
def test_a_published_checkpoint_exports_and_loads_standalone(upstream, tmp_path, rel, obs_dim,
                                                             obj, agents, task):
    source = Path(MAPUSH_SRC) / rel
    out = tmp_path / "out"
    proc = run_mapush(["export", "--checkpoint", source, "--out", out],
                      host_env(upstream, MAPUSH_SRC), cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["out"] == str(out)
    checkpoint = source if source.is_file() else sorted(
        (source / "checkpoints").glob("rl_model_*_steps"),
        key=lambda p: int(p.name.split("_")[2]))[-1]
    stems = ["policy", "command_net"] if task == "go1push_upper" else ["policy"]
    record = check_export(out, checkpoint, obs_dim, stems, upstream, tmp_path)
    assert (record["task"], record["agents"], record["library"]) == (task, agents, "openrl")
    assert record["object"] == (obj or "unknown: pass --object")
    assert len(record["layout"]["observation"]) == obs_dim
    assert record["networks"]["policy"]["obs_dim"] == obs_dim
    assert record["source"]["sha256"] == sha256(checkpoint if source.is_file()
                                                else checkpoint / "module.pt")
    assert record["control"]["period_s"] == 0.02
    # the locomotion policy rides along, and what the tree lacks is said
    loco = record["locomotion"]["files"]
    assert loco["adaptation_module_latest.jit"]["sha256"] == sha256(
        out / "locomotion" / "adaptation_module_latest.jit")
    body = Path(MAPUSH_SRC) / "mqe/utils/locomotion_checkpoints/walk_these_ways/body_latest.jit"
    assert ("missing" in loco["body_latest.jit"]) == (not body.is_file())
    assert ("body_latest.jit is missing" in proc.stderr) == (not body.is_file())
    assert ("the export lacks it (MAPUSH_ROOT=" in proc.stderr) == (not body.is_file())  # #81
    if task == "go1push_upper":
        assert record["chain"]["command_net"].endswith("1.2x1.2.pt")
        assert len(record["chain"]["layout"]["observation"]) == 8
    assert "onnxruntime" in (out / "README.md").read_text()
    assert not list(tmp_path.glob("*.partial"))


# -- checkpoints trained here -------------------------------------------------------------
@pytest.fixture(scope="module")
def trained(upstream, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("trained")
    runs = {}
    for algo, text in (("ppo", "episode_length: 20\nppo_epoch: 1\n"),
                       ("happo", "train:\n  episode_length: 20\nalgo:\n  ppo_epoch: 1\n"
                                 "  critic_epoch: 1\n")):
        (tmp / (algo + ".yaml")).write_text(text)
        run = tmp / algo
        proc = run_mapush(["train", "--algo", algo, "--num-envs", 4, "--steps", 80,
                           "--config", tmp / (algo + ".yaml"), "--run-dir", run] + CPU,
                          double_env(upstream), cwd=tmp)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[algo] = run
    return runs


@pytest.mark.parametrize("algo", ["ppo", "happo"])
def test_a_checkpoint_trained_here_exports_into_its_run(upstream, trained, tmp_path, algo):
    run = trained[algo]
    proc = run_mapush(["export", "--run", run], host_env(upstream, REPO / "tests" / "doubles"
                                                         / "mapush_root"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    checkpoint = sorted((run / "checkpoints").iterdir())[-1]
    out = run / "export" / checkpoint.name
    assert json.loads(proc.stdout.strip().splitlines()[-1])["out"] == str(out)
    stems = ["policy"] if algo == "ppo" else ["agent0", "agent1"]
    record = check_export(out, checkpoint, 8, stems, upstream, tmp_path)
    assert (record["algo"], record["object"], record["agents"]) == (algo, "cuboid", 2)
    if algo == "happo":  # each agent's actor, each checked against HARL's own act
        obs = np.random.RandomState(3).standard_normal((16, 8)).astype(np.float32)
        np.save(str(tmp_path / "obs1.npy"), obs)
        proc = subprocess.run([sys.executable, "-I", "-c", STANDALONE % (BLOCKED,), str(out),
                               str(tmp_path / "obs1.npy"), "agent1"], capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        expected = reference(checkpoint, tmp_path / "obs1.npy", upstream)[1]
        np.testing.assert_allclose(np.array(json.loads(proc.stdout)["agent1.onnx"]), expected,
                                   rtol=1e-5, atol=1e-5)


MISMATCH = r"""
import sys
from mapush import export
from mapush.cli import main
real = export._openrl
def shifted(file):
    net, reference = real(file)
    return net, lambda obs: reference(obs) + 1e-3  # the checkpoint's actions, moved
export._openrl = shifted
sys.exit(main(sys.argv[1:]))
"""


def test_a_mismatch_is_refused_and_leaves_nothing(upstream, trained, tmp_path):
    # in a child process: importing openrl here would leave the patched copy in sys.modules
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-c", MISMATCH, "export", "--run", trained["ppo"],
                           "--out", out], env=host_env(upstream, REPO), cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=300)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 1 and len(errors) == 1, proc.stderr[-3000:]
    assert "beyond the tolerance; nothing was exported" in errors[0]
    assert list(tmp_path.iterdir()) == []


# -- bad input: one line, exit 2, nothing written -----------------------------------------
def test_bad_input_is_one_line_and_writes_nothing(upstream, trained, tmp_path):
    env = host_env(upstream, REPO / "tests" / "doubles" / "mapush_root")
    (tmp_path / "notes").mkdir()
    harl = tmp_path / "lone"
    shutil.copytree(str(sorted((trained["happo"] / "checkpoints").iterdir())[-1]), str(harl))
    (harl / "harl_config.json").unlink()  # a checkpoint folder carries a copy of its run's
    meta = json.loads((harl / "meta.json").read_text())  # as one saved before the file record
    meta.pop("files")
    (harl / "meta.json").write_text(json.dumps(meta))
    other = tmp_path / "other-run"
    other.mkdir()
    (other / "config.json").write_text("{}")
    before = sorted(p.name for p in tmp_path.iterdir())
    ppo_before = sorted(str(p) for p in trained["ppo"].rglob("*"))
    cases = [
        (["--checkpoint", tmp_path / "notes"], "not a checkpoint"),
        (["--checkpoint", tmp_path / "absent"], "no such checkpoint"),
        (["--run", trained["ppo"], "--format", "pdf"], "invalid choice: 'pdf'"),
        (["--checkpoint", harl], "without its run's harl_config.json"),
        (["--run", trained["ppo"], "--out", other / "export"], "is inside the run"),
        # #77: a traceback after the rollout as root, whom access() lets "write" /proc
        (["--run", trained["ppo"], "--out", "/proc/nope/x"], "--out /proc/nope/x: not writable"),
    ]
    for args, needle in cases:
        proc = run_mapush(["export"] + args, env, cwd=tmp_path)
        assert needle in one_error(proc), (args, proc.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert sorted(str(p) for p in trained["ppo"].rglob("*")) == ppo_before
    assert sorted(p.name for p in other.iterdir()) == ["config.json"]


def test_out_replaces_only_a_previous_export_and_deletes_nothing_else(upstream, trained,
                                                                       tmp_path):
    """#50: --out that exists and is not an export of ours (its policy.json) is refused in
    one line before any work: a user's folder, the run being exported, the working folder
    and the one above it, a link, the run's export/ leading out of the run. A previous
    export is replaced, and a user's <out>.partial beside it is left alone."""
    env = host_env(upstream, REPO / "tests" / "doubles" / "mapush_root")
    work = tmp_path / "work"
    mine = work / "mine"
    mine.mkdir(parents=True)
    (mine / "thesis.tex").write_text("only copy")
    run = tmp_path / "run"
    shutil.copytree(str(trained["ppo"]), str(run))
    shutil.rmtree(str(run / "export"), ignore_errors=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "data.csv").write_text("1,2")
    (run / "export").symlink_to(outside)
    (work / "link").symlink_to(mine)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    cases = [(["--run", run, "--out", mine], "exists and is no result of mapush export"),
             (["--run", run, "--out", run], "exists and is no result of mapush export"),
             (["--run", run, "--out", "."], "is the working folder or one above it"),
             (["--run", run, "--out", ".."], "is the working folder or one above it"),
             (["--run", run, "--out", work / "link"], "is a symbolic link"),
             (["--run", run], "leads out of the run %s through a symbolic link" % run)]
    for args, needle in cases:
        proc = run_mapush(["export"] + args, env, cwd=work)
        assert needle in one_error(proc), (args, proc.stderr[-2000:])
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    (run / "export").unlink()
    out = work / "policy"
    (work / "policy.partial").mkdir()  # a user's folder of that name
    (work / "policy.partial" / "keep").write_text("mine")
    for _ in range(2):  # the second replaces the first
        proc = run_mapush(["export", "--run", run, "--out", out], env, cwd=work)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert json.loads((out / "policy.json").read_text())["networks"]
    assert (work / "policy.partial" / "keep").read_text() == "mine"
    assert sorted(p.name for p in work.iterdir()) == ["link", "mine", "policy", "policy.partial"]
    assert (mine / "thesis.tex").read_text() == "only copy"
    # #77: a file the user added to the export (a converted model) is named and kept
    (out / "policy.trt").write_text("my TensorRT engine")
    proc = run_mapush(["export", "--run", run, "--out", out], env, cwd=work)
    assert "policy.trt was not written by mapush export" in one_error(proc)
    assert (out / "policy.trt").read_text() == "my TensorRT engine"


def test_the_report_links_the_export_once_there_is_one(upstream, trained, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(str(trained["ppo"]), str(run))
    shutil.rmtree(str(run / "export"), ignore_errors=True)
    env = host_env(upstream, REPO / "tests" / "doubles" / "mapush_root")
    page = run / "report" / "index.html"
    proc = run_mapush(["report", run], env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "No export yet" in page.read_text() and "mapush export --run %s" % run in \
        page.read_text()
    assert run_mapush(["export", "--run", run], env, cwd=tmp_path).returncode == 0
    proc = run_mapush(["report", run], env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = page.read_text()
    links = [l.split('"')[0] for l in text.split('href="')[1:]]
    assert "No export yet" not in text and len(links) == 2
    assert all((page.parent / link).is_file() for link in links), links


# -- where a simulation runs: the observations of a rollout too ----------------------------
@pytest.mark.real_mqe
@pytest.mark.parametrize("rel, stems, rollout", [
    ("results/10-15-23_cylinder", ["policy"], 50 * 4 * 3),
    ("resources/goals_net/example.pt", ["policy", "command_net"], 50 * 4),
])
def test_the_export_is_checked_on_a_rollout_where_mqe_runs(real_mqe, tmp_path, rel, stems,
                                                           rollout):
    from tests.conftest import real_env

    out = tmp_path / "out"
    proc = run_mapush(["export", "--checkpoint", real_mqe["tree"] / rel, "--out", out] + CPU,
                      real_env(real_mqe), cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((out / "policy.json").read_text())
    networks = record["networks"]
    assert networks["policy"]["parity"]["rollout"] == rollout
    # #81: the prepared tree's body is the stand-in's, and the export says so
    assert record["locomotion"]["stand_in"].startswith("body_latest.jit: the Isaac Gym stand-in")
    assert "stand_in" in record["locomotion"]["files"]["body_latest.jit"]
    assert "**not walk-these-ways** but the Isaac Gym stand-in's body" in \
        (out / "README.md").read_text()
    if "command_net" in stems:
        assert "inside" in networks["command_net"]["parity"]["rollout"]


def test_each_harl_agent_is_checked_on_its_own_rollout_observations(upstream, trained,
                                                                    tmp_path):
    out = tmp_path / "out"
    proc = run_mapush(["export", "--run", trained["happo"], "--out", out] + CPU,
                      double_env(upstream), cwd=tmp_path)  # the double simulates
    assert proc.returncode == 0, proc.stderr[-3000:]
    networks = json.loads((out / "policy.json").read_text())["networks"]
    assert [networks["agent%d" % i]["parity"]["rollout"] for i in (0, 1)] == [50 * 4, 50 * 4]


@pytest.mark.faults
def test_sigterm_stops_an_export_with_nothing_left(upstream, trained, tmp_path):
    """#50 item 5: SIGTERM during the export's parity rollout (its slowest part) ends it with
    status 130 and one line; no --out, no scratch beside it, none in $TMPDIR."""
    import signal
    import time

    run = tmp_path / "run"
    shutil.copytree(str(trained["ppo"]), str(run))
    shutil.rmtree(str(run / "export"), ignore_errors=True)
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    out = tmp_path / "exp"
    env = double_env(upstream, MQE_DOUBLE_STEP_SLEEP="0.2", TMPDIR=tmpdir)
    proc = subprocess.Popen([sys.executable, "-m", "mapush", "export", "--run", str(run),
                             "--format", "torchscript", "--out", str(out)] + CPU, env=env,
                            cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            universal_newlines=True)
    deadline = time.monotonic() + 120
    while not list(tmpdir.glob("mapush-export-*")) and time.monotonic() < deadline:
        time.sleep(0.1)  # the rollout has begun: its observations' folder exists
    assert list(tmpdir.glob("mapush-export-*")), "the rollout never started"
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-3000:]
    assert err.strip().splitlines()[-1] == "mapush export: stopped by SIGTERM; nothing written"
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "tmpdir"]
    assert [p.name for p in tmpdir.iterdir() if p.name.startswith(("mapush-", "tmp"))] == []


def test_an_unknown_object_is_one_line_before_the_rollout(upstream, trained, tmp_path):
    """#77: `export --object bogus` exited 0 (or 1 after the rollout); eval refuses it
    before anything runs, and so does export now."""
    env = host_env(upstream, REPO / "tests" / "doubles" / "mapush_root")
    out = tmp_path / "exp"
    proc = run_mapush(["export", "--run", trained["ppo"], "--object", "bogus", "--out", out],
                      env, cwd=tmp_path)
    line = one_error(proc)
    assert "unknown object 'bogus'" in line and "cuboid" in line, line
    assert not out.exists()
