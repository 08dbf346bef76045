"""Atomic checkpoints and finding the newest complete one. (docs/architecture.md, "Modules")."""
import contextlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

from mapush.errors import MapushError, UsageError
from mapush.common.atomic import disk_full, fsync_path, fsync_tree, write_json
from mapush.common.files import read_regular
from mapush.common.hashing import sha256

META = "meta.json"
TMP_PREFIX = ".tmp-"


def checkpoints_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"


@contextlib.contextmanager
def atomic_checkpoint(run_dir: Path, name: str, meta: Dict[str, Any]) -> Iterator[Path]:
    """Yield a temporary folder; on success publish it as ``checkpoints/<name>``
    (docs/architecture.md, "Modules")."""
    if "step" not in meta:
        raise ValueError("checkpoint meta needs 'step'")
    root = checkpoints_dir(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    for path in root.glob(TMP_PREFIX + "*"):  # left by writers that were killed (pid gone)
        pid = path.name.rsplit("-", 1)[-1]
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                shutil.rmtree(str(path), ignore_errors=True)
            except PermissionError:
                pass  # alive, another user's
    tmp = root / ("%s%s-%d" % (TMP_PREFIX, name, os.getpid()))
    shutil.rmtree(str(tmp), ignore_errors=True)  # this writer's own leftover, if any
    tmp.mkdir()
    try:
        yield tmp
        files = {f.relative_to(tmp).as_posix(): file_digest(f)  # what meta.json vouches for
                 for f in sorted(tmp.rglob("*")) if f.is_file()}
        write_json(tmp / META, dict(meta, name=name, files=files))
        fsync_tree(tmp)
        final = root / name
        if final.exists():
            old = root / ("%s%s-old-%d" % (TMP_PREFIX, name, os.getpid()))
            os.replace(str(final), str(old))
            os.replace(str(tmp), str(final))
            shutil.rmtree(str(old), ignore_errors=True)
        else:
            os.replace(str(tmp), str(final))
        fsync_path(root)
    except BaseException as exc:
        full = isinstance(exc, Exception) and disk_full(exc, root)
        shutil.rmtree(str(tmp), ignore_errors=True)
        if full:
            latest = latest_checkpoint(run_dir)
            raise MapushError(
                "disk full while writing checkpoint %s (%s: %s): the newest complete "
                "checkpoint, %s, and config.json are intact; free space on %s, then resume "
                "with --resume %s" % (name, type(exc).__name__, " ".join(str(exc).split())[:200],
                                      "%s (step %d)" % (latest[1], latest[0]) if latest
                                      else "none", root, run_dir)) from exc
        raise


def file_digest(path: Path) -> Dict[str, Any]:
    """What a checkpoint's ``meta.json`` records of each of its files."""
    return {"bytes": path.stat().st_size, "sha256": sha256(path)}


def damaged(path: Path, meta: Dict[str, Any]) -> Optional[str]:
    """The first file of a checkpoint that is missing or differs from its record in
    ``meta.json`` (None: intact, or a checkpoint older than the record)."""
    for name, digest in sorted((meta.get("files") or {}).items()):
        if not (Path(path) / name).is_file() or file_digest(Path(path) / name) != digest:
            return name
    return None


def refuse_damaged(path: Path, meta: Dict[str, Any], what: str) -> Path:
    """A checkpoint named directly whose files differ from its ``meta.json``: one line."""
    bad = damaged(path, meta)
    if bad:
        raise UsageError("%s %s: its %s does not match the size/sha256 in meta.json (damaged): "
                         "name its run folder instead, which uses the newest intact checkpoint"
                         % (what, path, bad))
    return path


def read_meta(path: Path) -> Optional[Dict[str, Any]]:
    try:
        meta = json.loads(read_regular(Path(path) / META))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or not isinstance(meta.get("step"), int):
        return None
    return meta


def list_checkpoints(run_dir: Path) -> List[Tuple[int, Path, Dict[str, Any]]]:
    """Complete checkpoints of a run, oldest first, as ``(step, path, meta)``."""
    root = checkpoints_dir(run_dir)
    found = []
    if root.is_dir():
        for path in root.iterdir():
            if path.name.startswith(TMP_PREFIX) or not path.is_dir():
                continue
            meta = read_meta(path)
            if meta is not None:
                found.append((meta["step"], path, meta))
    found.sort(key=lambda item: (item[0], item[1].stat().st_mtime))
    return found


def passed_over(path: Path, meta: Dict[str, Any], then: str) -> bool:
    """Whether a checkpoint of a run folder is damaged, said in one line that ends ``then``."""
    bad = damaged(path, meta)
    if bad:
        print("mapush: %s is damaged (its %s does not match meta.json): %s" % (path, bad, then),
              file=sys.stderr)
    return bool(bad)


def latest_checkpoint(run_dir: Path) -> Optional[Tuple[int, Path, Dict[str, Any]]]:
    """The newest intact checkpoint; each damaged newer one is passed over in one line."""
    return next((c for c in reversed(list_checkpoints(run_dir))
                 if not passed_over(c[1], c[2], "using the checkpoint before it")), None)
