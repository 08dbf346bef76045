"""A command's ``--out`` folder: it replaces only a previous result of the same command
(recognised by that command's own manifest), never a folder of the user's, the working
folder or one above it, nor anything reached through a symbolic link; the new result is
built in a scratch folder beside it and takes its place by a rename, the old one renamed
aside first and removed only then (#50). The result lists every file it wrote, with its
sha256, in MANIFEST: a previous result holding a file it does not list, or one changed since,
is the user's too, and is refused by name, never deleted (#77)."""
import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Dict, Iterator, Optional

from mapush.common.atomic import writable, write_json
from mapush.common.files import read_regular
from mapush.common.hashing import sha256
from mapush.errors import UsageError

MANIFEST = ".mapush-out.json"


def _files(folder: Path) -> Dict[str, str]:
    """``{relative path: sha256}`` of every file under ``folder`` (a link: its target's
    path, so it matches no file written), the manifest left out."""
    found = {}
    for here, dirs, names in os.walk(str(folder)):
        for name in names + [d for d in dirs if os.path.islink(os.path.join(here, d))]:
            path = os.path.join(here, name)
            rel = os.path.relpath(path, str(folder))
            if rel == MANIFEST:
                continue
            if os.path.islink(path) or not os.path.isfile(path):
                found[rel] = "not a file: " + os.path.realpath(path)
                continue
            found[rel] = sha256(path)
    return found


def not_written(out: Path, what: str) -> Optional[str]:
    """The first file in ``out`` that ``what``'s manifest there does not list as it wrote it
    (added or changed since), or the missing manifest; None: all of it is ``what``'s."""
    try:
        record = json.loads(read_regular(out / MANIFEST))
        listed = record["files"] if record.get("command") == what else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        listed = None
    if not isinstance(listed, dict):
        return "it has no %s of %s" % (MANIFEST, what)
    for rel, digest in sorted(_files(out).items()):
        if listed.get(rel) != digest:
            return "%s was not written by %s (or changed since)" % (out / rel, what)
    return None


def refuse_foreign(out: Path, is_own: Callable[[Path], bool], what: str,
                   run: Optional[Path] = None, manifest: bool = False) -> None:
    """One UsageError unless ``out`` is new or a previous result (``is_own``) of ``what``
    (``mapush export``, say), with ``manifest`` nothing in it but what its manifest lists;
    ``run``: a run ``out`` may lie in, but not leave through a link."""
    resolved, here = out.resolve(), Path.cwd().resolve()
    if out.is_symlink():
        raise UsageError("--out %s is a symbolic link; pass a folder" % out)
    if resolved == here or resolved in here.parents:
        raise UsageError("--out %s is the working folder or one above it; pass a new folder"
                         % out)
    if run is not None and run.absolute() in out.absolute().parents \
            and run.resolve() not in resolved.parents:
        raise UsageError("--out %s leads out of the run %s through a symbolic link; pass a "
                         "folder outside it, or remove the link" % (out, run))
    if out.exists() and not out.is_dir():
        raise UsageError("--out %s is a file; pass a folder" % out)
    if not writable(out):
        raise UsageError("--out %s: not writable (read-only, not yours, or under a file); "
                         "pass --out DIR where you may write" % out)
    if out.is_dir() and any(out.iterdir()) and not is_own(out):
        raise UsageError("--out %s exists and is no result of %s (it lacks that command's own "
                         "manifest); pass a new folder: %s replaces only its own previous "
                         "result" % (out, what, what))
    problem = not_written(out, what) if manifest and out.is_dir() and any(out.iterdir()) \
        else None
    if problem:
        raise UsageError("--out %s: %s; %s replaces only what it wrote: move that file out, "
                         "or pass a new folder" % (out, problem, what))


@contextlib.contextmanager
def scratch_beside(out: Path) -> Iterator[Path]:
    """Our own scratch folder beside ``out`` (a name nobody else holds), removed whatever
    happens; :func:`replace` moves it into place."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=".%s.partial-" % out.name, dir=str(out.parent)))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(str(partial), 0o777 & ~umask)  # the result's mode follows the umask, as mkdir
    try:
        yield partial
    finally:
        shutil.rmtree(str(partial), ignore_errors=True)


def replace(new: Path, out: Path, is_own: Callable[[Path], bool], what: str) -> None:
    """``new`` becomes ``out``, with its manifest: a previous result (checked again here, in
    case it changed meanwhile, against its own manifest) is renamed aside first and removed
    only once the new one is in place."""
    write_json(new / MANIFEST, {"command": what, "files": _files(new)})
    if out.is_dir() and not any(out.iterdir()):
        out.rmdir()
    if not out.exists():
        os.replace(str(new), str(out))
        return
    refuse_foreign(out, is_own, what, manifest=True)
    aside = Path(tempfile.mkdtemp(prefix=".%s.old-" % out.name, dir=str(out.parent)))
    os.replace(str(out), str(aside / "previous"))
    os.replace(str(new), str(out))
    shutil.rmtree(str(aside), ignore_errors=True)
