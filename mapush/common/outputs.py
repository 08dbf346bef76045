"""A command's ``--out`` folder: it replaces only a previous result of the same command
(recognised by that command's own manifest), never a folder of the user's, the working
folder or one above it, nor anything reached through a symbolic link; the new result is
built in a scratch folder beside it and takes its place by a rename, the old one renamed
aside first and removed only then (#50)."""
import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Iterator, Optional

from mapush.common.atomic import writable
from mapush.errors import UsageError


def refuse_foreign(out: Path, is_own: Callable[[Path], bool], what: str,
                   run: Optional[Path] = None) -> None:
    """One UsageError unless ``out`` is new or a previous result (``is_own``) of ``what``
    (``mapush export``, say); ``run``: a run ``out`` may lie in, but not leave through a
    link."""
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


@contextlib.contextmanager
def scratch_beside(out: Path) -> Iterator[Path]:
    """Our own scratch folder beside ``out`` (a name nobody else holds), removed whatever
    happens; :func:`replace` moves it into place."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=".%s.partial-" % out.name, dir=str(out.parent)))
    try:
        yield partial
    finally:
        shutil.rmtree(str(partial), ignore_errors=True)


def replace(new: Path, out: Path, is_own: Callable[[Path], bool], what: str) -> None:
    """``new`` becomes ``out``: a previous result (checked again here, in case it changed
    meanwhile) is renamed aside first and removed only once the new one is in place."""
    if out.is_dir() and not any(out.iterdir()):
        out.rmdir()
    if not out.exists():
        os.replace(str(new), str(out))
        return
    refuse_foreign(out, is_own, what)
    aside = Path(tempfile.mkdtemp(prefix=".%s.old-" % out.name, dir=str(out.parent)))
    os.replace(str(out), str(aside / "previous"))
    os.replace(str(new), str(out))
    shutil.rmtree(str(aside), ignore_errors=True)
