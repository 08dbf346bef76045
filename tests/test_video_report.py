"""Seeing the policy: env 0's episodes as H.264 videos, and the run report in a browser.

The double renders a synthetic picture through MQE's recording API (``start_recording``,
``video_frames``, ``store_recording`` when env 0 resets). The videos are decoded back with
imageio-ffmpeg, the library that wrote them. The report is built from a real training run,
its eval and its videos over the double, and opened in Debian's headless Chromium, which
must show every image, no broken one, and no error in the page's console.
"""
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import DOUBLE_ROOT, double_env, one_error, run_mapush

NUM_ENVS = 4
CPU = ["--sim-device", "cpu", "--rl-device", "cpu"]


def render_env(upstream, tmp, **extra):
    """The double with rendering support: an NVIDIA Vulkan ICD file, on a host."""
    icd = Path(tmp) / "nvidia_icd.json"
    icd.write_text('{"ICD": {"library_path": "libGLX_nvidia.so.0"}}')
    return double_env(upstream, **dict({"VK_ICD_FILENAMES": icd, "MAPUSH_WHERE": "host"},
                                       **extra))



@pytest.fixture(scope="module")
def run(upstream, tmp_path_factory):
    """A PPO run with two checkpoints, evaluated, and two videos of its newest."""
    tmp = tmp_path_factory.mktemp("seen")
    config = tmp / "small.yaml"
    config.write_text("episode_length: 25\nppo_epoch: 1\n")
    run = tmp / "run"
    proc = run_mapush(["train", "--num-envs", NUM_ENVS, "--steps", 200,
                       "--checkpoint-interval", 100, "--config", config, "--run-dir", run] + CPU,
                      double_env(upstream), cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = run_mapush(["eval", "--run", run, "--num-envs", NUM_ENVS] + CPU,
                      double_env(upstream), cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    video = run_mapush(["eval", "--checkpoint", run, "--video", "--episodes", 2] + CPU,
                       render_env(upstream, tmp), cwd=tmp)
    assert video.returncode == 0, video.stderr[-3000:]
    return {"run": run, "tmp": tmp, "video": video}


def test_videos_of_env_0_are_h264_with_the_outcome_in_the_name(run):
    import imageio_ffmpeg

    result = json.loads(run["video"].stdout.strip().splitlines()[-1])
    videos = result["videos"]
    names = [Path(v["file"]).name for v in videos]
    assert names == ["rl_model_200_steps-ep1-success.mp4", "rl_model_200_steps-ep2-success.mp4"]
    assert sorted(p.name for p in (run["run"] / "videos").iterdir()) == names  # no temporaries
    for video in videos:
        reader = imageio_ffmpeg.read_frames(video["file"])
        meta = next(reader)
        frames = sum(1 for _ in reader)
        assert meta["codec"] == "h264" and meta["size"] == (1080, 1080)  # go1_config.py:51-52
        assert frames == video["frames"] > 0
        assert meta["fps"] == pytest.approx(10.0)  # 1 / dt of the double (decimation 2 x 0.05)
    assert "episode 1/2" in run["video"].stderr  # a bar per episode


@pytest.mark.parametrize("algo,extra", [("ppo", ["--config"]), ("happo", [])])
def test_record_video_films_env_0_at_the_start_and_after_every_interval(upstream, tmp_path,
                                                                         algo, extra):
    """#38 item 6: ``train --record-video`` films env 0's next whole episode at the start and
    after every ``--checkpoint-interval`` env steps into RUN/videos/train-<step>-ep1-*.mp4."""
    import imageio_ffmpeg

    config = tmp_path / "small.yaml"
    config.write_text("episode_length: 25\nppo_epoch: 1\n")
    extra = ["--config", config] if extra else ["--set", "train.episode_length=25"]
    run = tmp_path / "run"
    proc = run_mapush(["train", "--algo", algo, "--num-envs", NUM_ENVS, "--steps", 400,
                       "--checkpoint-interval", 100, "--record-video", "--run-dir", run]
                      + CPU + extra, render_env(upstream, tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    videos = sorted((run / "videos").iterdir(), key=lambda p: int(p.name.split("-")[1]))
    steps = [int(p.name.split("-")[1]) for p in videos]
    assert 0 < steps[0] < 100 and [s // 100 for s in steps[1:]] == [1, 2, 3], steps
    assert all(re.match(r"train-\d+-ep1-(success|fail)\.mp4$", p.name) for p in videos)
    lengths = set()
    for video in videos:
        reader = imageio_ffmpeg.read_frames(str(video))
        next(reader)  # the header
        lengths.add(sum(1 for _ in reader))
    assert len(lengths) == 1 and lengths.pop() > 1  # the double's episodes: all one length
    assert proc.stderr.count("mapush: video ") == 4
    assert "recording" not in proc.stdout  # MQE's prints at each start and pause
    assert "no film was completed" not in proc.stderr


def test_record_video_checks_rendering_before_training(upstream, tmp_path):
    """#51 item 4: ``train --record-video`` skipped the rendering check ``eval --video`` runs:
    now its preflight has it, and without an NVIDIA Vulkan ICD nothing starts."""
    run = tmp_path / "run"
    env = double_env(upstream, VK_ICD_FILENAMES=tmp_path / "none.json", MAPUSH_WHERE="host")
    proc = run_mapush(["train", "--num-envs", NUM_ENVS, "--steps", 400, "--record-video",
                       "--run-dir", run] + CPU, env, cwd=tmp_path)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 3 and len(errors) == 1 and "rendering" in errors[0], proc.stderr
    assert "no NVIDIA Vulkan ICD" in proc.stderr and not run.exists()


def test_a_failed_episode_says_so_in_its_name(upstream, run, tmp_path):
    out = tmp_path / "videos"
    proc = run_mapush(["eval", "--checkpoint", run["run"], "--video", "--out", out] + CPU,
                      render_env(upstream, tmp_path, MQE_DOUBLE_SUCCESS_ENVS="none"),
                      cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [p.name for p in out.iterdir()] == ["rl_model_200_steps-ep1-fail.mp4"]


def test_frames_are_streamed_never_held():
    """Every frame MQE appends is written and taken out at once: the list never grows."""
    import numpy as np

    from mapush.video import EpisodeRecorder

    class Camera(object):
        video_frames = []

    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        recorder = EpisodeRecorder(Path(folder), "ck", episodes=1, fps=50)
        env = Camera()
        sizes = []
        for step in range(30):
            env.video_frames.append(np.full((48, 64, 4), step * 8, dtype=np.uint8))
            recorder.drain(env)
            sizes.append(len(env.video_frames))
        path = recorder.end_episode(success=False)
        assert sizes == [0] * 30 and recorder.finished
        assert path.name == "ck-ep1-fail.mp4" and path.stat().st_size > 0


def test_a_film_never_replaces_a_file_of_its_name(tmp_path):
    """#77: eval --video --out overwrote a user's file of the same name; the film takes the
    next free name instead, and the user's file is kept."""
    import numpy as np

    from mapush.video import EpisodeRecorder

    (tmp_path / "ck-ep1-fail.mp4").write_text("my own film")
    (tmp_path / "ck-ep1-fail-2.mp4").write_text("my second")

    class Camera(object):
        video_frames = [np.zeros((48, 64, 3), dtype=np.uint8) for _ in range(5)]

    recorder = EpisodeRecorder(tmp_path, "ck", episodes=1, fps=50)
    recorder.drain(Camera())
    path = recorder.end_episode(success=False)
    assert path.name == "ck-ep1-fail-3.mp4" and path.stat().st_size > 0
    assert (tmp_path / "ck-ep1-fail.mp4").read_text() == "my own film"
    assert (tmp_path / "ck-ep1-fail-2.mp4").read_text() == "my second"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ck-ep1-fail-2.mp4", "ck-ep1-fail-3.mp4", "ck-ep1-fail.mp4"]  # no .tmp- left


def test_a_stop_mid_film_leaves_no_file(tmp_path, capsys):
    """A training film cut by a stop (the adapter's close) leaves nothing in videos/, and a
    run that completed no film says so in one line (#51 item 4)."""
    import numpy as np
    import torch

    from mapush.video import TrainingVideos

    class Env(object):  # MQE's recording interface, as the double and upstream have it
        num_envs, dt, video_frames, recording = 2, 0.02, [], False
        finished_buf = torch.zeros(2, dtype=torch.bool)

        def step(self, _actions):
            if self.recording:
                self.video_frames.append(np.zeros((8, 8, 3), dtype=np.uint8))
            self.steps = getattr(self, "steps", 0) + 1
            return None, None, torch.tensor([self.steps == 1, False]), None  # env 0 resets once

        def start_recording(self):
            self.recording = True

        def pause_recording(self):
            self.recording = False

    videos = TrainingVideos(Env(), tmp_path / "videos", every=100)
    for _ in range(100):  # env 0 resets at the first step, then the film runs
        videos.step_env(None)
    deadline = time.monotonic() + 30  # ffmpeg, a process of its own, creates the file
    while not list((tmp_path / "videos").iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert videos.recorder is not None and len(list((tmp_path / "videos").iterdir())) == 1
    videos.close()
    assert list((tmp_path / "videos").iterdir()) == []
    assert "mapush: --record-video: no film was completed in %s" % (tmp_path / "videos") \
        in capsys.readouterr().err


@pytest.mark.parametrize("case, needle", [
    ("no-icd", "no NVIDIA Vulkan ICD"),
    ("no-graphics", "lacks the NVIDIA 'graphics' driver capability"),
])
def test_video_without_rendering_support_stops_before_the_simulation(upstream, run, tmp_path,
                                                                     case, needle):
    log = tmp_path / "env.jsonl"
    if case == "no-icd":
        env = double_env(upstream, VK_ICD_FILENAMES=tmp_path / "none.json", MAPUSH_WHERE="host",
                         MQE_DOUBLE_LOG=log)
    else:
        env = render_env(upstream, tmp_path, MAPUSH_WHERE="container",
                         NVIDIA_DRIVER_CAPABILITIES="compute,utility", MQE_DOUBLE_LOG=log)
    proc = run_mapush(["eval", "--checkpoint", run["run"], "--video"] + CPU, env, cwd=tmp_path)
    error = one_error(proc)
    assert needle in error and "mapush doctor --video" in error
    assert not log.exists()


# -- the report --------------------------------------------------------------------------
def chromium():
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        if os.environ.get("CI"):
            pytest.fail("CI must provide Debian's chromium (see .ci/run)")
        pytest.skip("no chromium (apt-get install chromium)")
    return path


CHECK = """<script>
window.__errors = [];
window.addEventListener("error", function (e) {
  window.__errors.push(String(e.message || (e.target && e.target.src) || e.type));
}, true);
var log = console.error;
console.error = function () { window.__errors.push([].join.call(arguments, " ")); };
window.addEventListener("load", function () {
  var images = [].slice.call(document.images);
  var broken = images.filter(function (i) { return !i.complete || i.naturalWidth === 0; });
  document.body.setAttribute("data-images", images.length);
  document.body.setAttribute("data-broken", broken.map(function (i) { return i.src; }).join(" "));
  document.body.setAttribute("data-errors", window.__errors.join(" | "));
});
</script>"""


def open_in_chromium(page, screenshot):
    """(images, broken images, page errors, console lines) of ``page`` in headless Chromium,
    through a copy beside it that records them; a screenshot of the page itself."""
    probe = page.parent / "_check.html"
    probe.write_text(page.read_text().replace("<head>", "<head>" + CHECK, 1))
    browser = [chromium(), "--headless", "--no-sandbox", "--disable-gpu",
               "--enable-logging=stderr", "--v=0", "--virtual-time-budget=8000"]
    try:
        dom = subprocess.run(browser + ["--dump-dom", probe.as_uri()], capture_output=True,
                             text=True, timeout=120)
        shot = subprocess.run(browser + ["--screenshot=%s" % screenshot,
                                         "--window-size=1400,2400", page.as_uri()],
                              capture_output=True, text=True, timeout=120)
    finally:
        probe.unlink()
    assert shot.returncode == 0 and Path(screenshot).stat().st_size > 10000, shot.stderr[-2000:]
    import re

    attr = lambda name: re.search(r'data-%s="([^"]*)"' % name, dom.stdout)  # noqa: E731
    assert attr("images"), dom.stdout[-2000:] + dom.stderr[-2000:]
    console = [line for line in dom.stderr.splitlines() + shot.stderr.splitlines()
               if "CONSOLE" in line]
    return (int(attr("images").group(1)), attr("broken").group(1).split(),
            attr("errors").group(1), console)


@pytest.fixture(scope="module")
def report(upstream, run):
    proc = run_mapush(["report", run["run"]], double_env(upstream), cwd=run["tmp"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"page": run["run"] / "report" / "index.html", "proc": proc}


def test_the_report_shows_curves_metrics_videos_and_config(report, run, tmp_path):
    page = report["page"]
    text = page.read_text()
    for png in ("metrics.png", "rewards.png", "losses.png", "speed.png", "eval.png"):
        assert (page.parent / png).stat().st_size > 1000, png
        assert 'src="%s"' % png in text
    assert text.count("<video") == 2 and "rl_model_200_steps-ep1-success.mp4" in text
    assert "<td>ppo</td>" in text and "<td>cuboid</td>" in text
    assert "No evaluation" not in text and "No video" not in text
    images, broken, errors, console = open_in_chromium(page, tmp_path / "report.png")
    assert images >= 5 and broken == [] and errors == "" and console == []
    assert "drawing rewards.png" in report["proc"].stderr  # progress while it builds


def test_the_browser_check_catches_a_broken_image(report, tmp_path):
    """The check above fails when an image is missing: it is not vacuous."""
    copy = tmp_path / "report"
    shutil.copytree(str(report["page"].parent), str(copy))
    (copy / "losses.png").unlink()
    page = copy / "index.html"
    page.write_text(page.read_text().replace('src="../videos/', 'src="%s/' % (
        report["page"].parent.parent / "videos")))
    _images, broken, errors, _console = open_in_chromium(page, tmp_path / "broken.png")
    assert [Path(b).name for b in broken] == ["losses.png"] and "losses.png" in errors


def test_a_run_without_eval_or_video_names_the_commands(upstream, run, tmp_path):
    bare = tmp_path / "bare"
    shutil.copytree(str(run["run"]), str(bare), ignore=shutil.ignore_patterns(
        "eval.jsonl", "videos", "report"))
    proc = run_mapush(["report", bare], double_env(upstream), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = (bare / "report" / "index.html").read_text()
    assert "No evaluation (eval.jsonl) yet: <code>make eval RUN=%s" % bare in text
    assert "No video yet: <code>make video RUN=%s" % bare in text


def test_the_authors_curves_are_drawn_beside_ours(upstream, run, tmp_path):
    from tensorboardX import SummaryWriter

    root = tmp_path / "mapush_root"
    shutil.copytree(str(DOUBLE_ROOT), str(root))
    theirs = root / "results" / "10-15-23_cuboid"
    (theirs / "checkpoints" / "rl_model_100_steps").mkdir(parents=True)
    (theirs / "checkpoints" / "rl_model_100_steps" / "module.pt").write_bytes(b"x")
    (theirs / "task").mkdir()
    shutil.copy(str(DOUBLE_ROOT / "task" / "cuboid" / "config.py"), str(theirs / "task"))
    (theirs / "success_rate.txt").write_text(
        "Loaded checkpoint from: x/rl_model_100_steps/module.pt\nsuccess rate: 0.25\n")
    writer = SummaryWriter(str(theirs / "logs" / "push_reward" / "push_reward"))
    for step in (100, 200):
        writer.add_scalar("push_reward", 0.5, step)
    writer.close()
    proc = run_mapush(["report", run["run"], "--out", tmp_path / "page"],
                      double_env(upstream, MAPUSH_ROOT=root), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "the authors' curves from %s" % theirs in proc.stderr
    assert str(theirs) in (tmp_path / "page" / "index.html").read_text()


def test_report_bad_inputs(upstream, run, tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "config.json").write_text("{}")
    proc = run_mapush(["report", empty], double_env(upstream), cwd=tmp_path)
    assert "has no TensorBoard events" in one_error(proc)
    from mapush import report
    from mapush.errors import UsageError

    monkeypatch.setattr(report.os, "access", lambda path, mode: False)
    import argparse

    with pytest.raises(UsageError, match="not writable .*pass --out DIR"):
        report.main(argparse.Namespace(run=str(run["run"]), out=None))


@pytest.mark.security
def test_report_out_replaces_only_a_previous_report(upstream, run, tmp_path):
    """#50 item 1: --out that holds the user's files (or is the working folder, or a link)
    is refused with one line before anything is written; a previous report is replaced by a
    rename, with no scratch folder left beside it."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "index.html").write_text("my notes")
    env = double_env(upstream)
    proc = run_mapush(["report", run["run"], "--out", mine], env, cwd=tmp_path)
    assert "exists and is no result of mapush report" in one_error(proc)
    assert [p.name for p in mine.iterdir()] == ["index.html"]
    assert (mine / "index.html").read_text() == "my notes"
    proc = run_mapush(["report", run["run"], "--out", "."], env, cwd=tmp_path)
    assert "is the working folder or one above it" in one_error(proc)
    link = tmp_path / "link"
    link.symlink_to(mine)
    proc = run_mapush(["report", run["run"], "--out", link], env, cwd=tmp_path)
    assert "is a symbolic link" in one_error(proc)
    page = tmp_path / "page"
    for _ in range(2):  # the second replaces the first
        proc = run_mapush(["report", run["run"], "--out", page], env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert proc.stdout.strip() == str(page / "index.html")
    assert 'content="mapush report"' in (page / "index.html").read_text()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    # #77: the result's mode follows the umask (mkdtemp's 0700 did not)
    assert page.stat().st_mode & 0o777 == 0o777 & ~current_umask()
    # #77: a user's note added to a previous report, or a page of the report's changed, is
    # named and kept, never deleted; a page titled "MAPush run" is no report of ours
    (page / "notes.txt").write_text("my notes")
    proc = run_mapush(["report", run["run"], "--out", page], env, cwd=tmp_path)
    line = one_error(proc)
    assert "notes.txt was not written by mapush report" in line, line
    assert (page / "notes.txt").read_text() == "my notes"
    (page / "notes.txt").unlink()
    with open(str(page / "index.html"), "a") as handle:
        handle.write("<!-- my edit -->")
    assert "index.html was not written by mapush report" in one_error(
        run_mapush(["report", run["run"], "--out", page], env, cwd=tmp_path))
    titled = tmp_path / "titled"
    titled.mkdir()
    (titled / "index.html").write_text("<html><head><title>MAPush run notes</title></head>")
    proc = run_mapush(["report", run["run"], "--out", titled], env, cwd=tmp_path)
    assert "exists and is no result of mapush report" in one_error(proc)
    assert (titled / "index.html").read_text().startswith("<html><head><title>MAPush run")


def current_umask():
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.faults
def test_sigterm_while_a_report_is_drawn_leaves_nothing(upstream, run, tmp_path):
    """#77: SIGTERM (a scheduler's stop, `kill`) while the page is drawn ends the command with
    one line and status 143, its scratch folder removed: no hidden .partial-* left."""
    import signal
    import subprocess
    import sys

    page = tmp_path / "page"
    proc = subprocess.Popen([sys.executable, "-m", "mapush", "report", str(run["run"]),
                             "--out", str(page)], env=double_env(upstream), cwd=str(tmp_path),
                            stderr=subprocess.PIPE, universal_newlines=True)
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "drawing" in line:  # the scratch folder exists and is being filled
            break
    assert [p for p in tmp_path.iterdir() if ".partial-" in p.name], seen
    proc.send_signal(signal.SIGTERM)
    rest = proc.stderr.read()
    assert proc.wait(timeout=60) == 143, "".join(seen) + rest
    errors = [line for line in rest.splitlines() if line.startswith("error:")]
    assert errors == ["error: stopped by SIGTERM; what it had not finished was removed"], rest
    assert list(tmp_path.iterdir()) == [], list(tmp_path.iterdir())
