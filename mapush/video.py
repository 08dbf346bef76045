"""Episode videos of env 0, streamed to an H.264 encoder frame by frame."""
import contextlib
import os
import sys
from pathlib import Path
from typing import Any, Callable, List, Optional

import numpy as np

FPS_MAX = 60


class EpisodeRecorder(object):
    def __init__(self, folder: Path, prefix: str, episodes: int, fps: float,
                 on_frame: Optional[Callable[[int, int], None]] = None) -> None:
        self.folder, self.prefix, self.episodes = Path(folder), prefix, int(episodes)
        self.fps = max(1.0, min(float(fps), FPS_MAX))
        self.on_frame = on_frame
        self.done = []  # type: List[Path]
        self.frames = 0
        self._writer = None  # type: Any
        self._tmp = None  # type: Optional[Path]
        self._size = None  # type: Optional[tuple]

    @property
    def finished(self) -> bool:
        return len(self.done) >= self.episodes

    def _open(self, height: int, width: int) -> None:
        import imageio_ffmpeg

        self.folder.mkdir(parents=True, exist_ok=True)
        self._tmp = self.folder / (".tmp-%s-ep%d-%d.mp4" % (self.prefix, len(self.done) + 1,
                                                           os.getpid()))
        self._size = (height, width)
        # H.264 needs even sizes: 16-pixel macro blocks are padded by ffmpeg itself.
        self._writer = imageio_ffmpeg.write_frames(
            str(self._tmp), (width, height), fps=self.fps, codec="libx264",
            pix_fmt_in="rgb24", pix_fmt_out="yuv420p", macro_block_size=2,
            output_params=["-movflags", "+faststart"], ffmpeg_log_level="error")
        self._writer.send(None)

    def write(self, frame: Any) -> None:
        """One RGB(A) frame ``(height, width, 3 or 4)``, uint8."""
        image = np.asarray(frame)
        if image.ndim != 3 or image.shape[2] not in (3, 4):
            raise ValueError("a camera frame of shape %s, expected (height, width, 3 or 4)"
                             % (image.shape,))
        rgb = np.ascontiguousarray(image[:, :, :3], dtype=np.uint8)
        if self._writer is None:
            self._open(rgb.shape[0], rgb.shape[1])
        self._writer.send(rgb.tobytes())
        self.frames += 1
        if self.on_frame is not None:
            self.on_frame(len(self.done) + 1, self.frames)

    def drain(self, env: Any) -> None:
        """Stream the frames MQE rendered since the last call, and keep its list empty."""
        frames = getattr(env, "video_frames", None)
        while frames:
            self.write(frames.pop(0))

    def end_episode(self, success: bool) -> Optional[Path]:
        """Env 0's episode ended: publish its file; None when it had no frame."""
        if self._writer is None:
            return None
        self._writer.close()
        self._writer = None
        stem = "%s-ep%d-%s" % (self.prefix, len(self.done) + 1, "success" if success else "fail")
        final, n = self.folder / (stem + ".mp4"), 1
        while True:  # the name is taken only if free (O_EXCL): a user's file is kept (#77)
            try:
                os.close(os.open(str(final), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
                break
            except FileExistsError:
                n += 1
                final = self.folder / ("%s-%d.mp4" % (stem, n))
        os.replace(str(self._tmp), str(final))  # over the placeholder just made, ours
        self.done.append(final)
        self.frames = 0
        return final

    def abort(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            finally:
                self._writer = None
                if self._tmp is not None and self._tmp.exists():
                    self._tmp.unlink()


class TrainingVideos(object):
    """``train --record-video``: env 0's next whole episode at the start and after every
    ``every`` env steps, into ``folder``/train-<step>-ep1-<success|fail>.mp4."""

    def __init__(self, env: Any, folder: Path, every: int, step: int = 0,
                 quiet: bool = True) -> None:
        self.env, self.folder, self.every, self.quiet = env, Path(folder), max(1, every), quiet
        self.step, self.due, self.recorder = int(step), int(step), None  # type: Any

    def step_env(self, actions: Any) -> Any:
        """``env.step`` (MQE prints at env 0's resets while filming), then the camera."""
        with contextlib.redirect_stdout(None if self.quiet else sys.stdout):
            out = self.env.step(actions)
            self.step += int(self.env.num_envs)
            if self.recorder is None and self.step < self.due:
                return out  # no host sync between films
            if not bool(out[2].reshape(-1)[0]):
                if self.recorder is not None:
                    self.recorder.drain(self.env)
            elif self.recorder is None:  # env 0 begins an episode: film it
                self.recorder = EpisodeRecorder(self.folder, "train-%d" % self.step, 1,
                                                1.0 / float(self.env.dt))
                self.env.start_recording()
            else:
                path = self.recorder.end_episode(bool(self.env.finished_buf.reshape(-1)[0]))
                self.env.pause_recording()
                self.recorder, self.due = None, (self.step // self.every + 1) * self.every
                if path is not None:
                    print("mapush: video %s" % path, file=sys.stderr, flush=True)
        return out

    def close(self) -> None:
        """A stop: a half-written film goes; a run without one film says so."""
        if self.recorder is not None:
            self.recorder.abort()
        if not list(self.folder.glob("train-*.mp4")):
            print("mapush: --record-video: no film was completed in %s (env 0's episode never "
                  "ended while filming, or the camera gave no frame: mapush doctor --video "
                  "checks rendering)" % self.folder, file=sys.stderr, flush=True)
