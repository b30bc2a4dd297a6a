"""Folders written atomically: built under a temporary name beside their destination, renamed when complete.

The one writer behind results folders (:func:`poslab.study.write_results`)
and training runs (:class:`poslab.training.RunWriter`). Its guarantees:

- the destination either keeps what it held before or holds the complete new
  folder, never a half-written one: an error, Ctrl-C or SIGTERM removes the
  temporary folder, and a failed swap puts the previous folder back;
- temporaries are named ``.NAME.poslab-tmp-XXXXXXXX`` (the new folder) and
  ``.NAME.poslab-old-XXXXXXXX`` (the previous folder during the swap, inside
  as ``previous``), and the process writing one holds an exclusive
  ``flock`` on it. The lock dies with the process, so after a ``kill -9`` the
  next write into the same parent folder recognises the temporary as stale
  (poslab's name pattern, a folder owned by this user, no lock held) and
  removes it; a stale ``old`` one whose destination is missing is renamed back
  to its destination instead, so a previous result is never lost. Nothing
  else is ever removed: not a user's files, not another running poslab's
  temporaries.

Platforms without ``fcntl`` (Windows) cannot tell a stale temporary from a
live one; there nothing is cleaned up.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

__all__ = ["AtomicFolder", "remove_stale_temporaries", "TEMPORARY_PATTERN", "check_can_create", "friendly_os_error"]

#: Names of poslab's own temporary folders: group ``name`` is the destination's name.
TEMPORARY_PATTERN = re.compile(r"^\.(?P<name>.+)\.poslab-(?P<role>tmp|old)-[A-Za-z0-9_]{8}$")
_PREVIOUS = "previous"


def _lock(folder: Path) -> int | None:
    """Open ``folder`` and take an exclusive, non-blocking flock on it; the descriptor, or None if held elsewhere."""
    if fcntl is None:
        return None
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _unlock(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)  # closing the descriptor releases the flock


def _temporary(parent: Path, name: str, role: str) -> tuple[Path, int | None]:
    path = Path(tempfile.mkdtemp(prefix=f".{name}.poslab-{role}-", dir=parent))
    return path, _lock(path)


def _discard(path: Path, out: Path) -> None:
    """Remove the temporary folder ``path`` (of the destination ``out``), which a thread of this process may still
    be writing into: after Ctrl-C, :func:`poslab.study.write_results` does not wait for the figure under way.

    The folder is first renamed to a fresh temporary name (onto an empty folder made for it), so that no file can
    appear under its old path any more; a file created between a removal's listing and its final ``rmdir`` would
    otherwise leave the folder behind. The lock moves with it (it is on the folder itself). Removed again, a few
    times at most, should a file still have appeared.
    """
    target = path
    try:
        trash = Path(tempfile.mkdtemp(prefix=f".{out.name}.poslab-tmp-", dir=path.parent))
    except OSError:
        trash = None
    if trash is not None:
        try:
            os.rename(path, trash)  # replaces the empty folder (POSIX); elsewhere it fails: removed in place
            target = trash
        except OSError:
            trash.rmdir()
    for _ in range(10):
        shutil.rmtree(target, ignore_errors=True)
        if not os.path.lexists(target):
            break


def remove_stale_temporaries(parent) -> list[Path]:
    """Remove poslab temporaries in ``parent`` left by a process that died; return what was removed or restored.

    A folder counts as stale only if its name matches :data:`TEMPORARY_PATTERN`,
    it is a real folder (not a symlink) owned by this user, and no process
    holds its lock. A stale ``old`` folder whose destination is missing is
    renamed back to the destination (the previous result survives).
    """
    parent = Path(parent)
    if fcntl is None:
        return []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return []
    done = []
    for entry in entries:
        match = TEMPORARY_PATTERN.match(entry.name)
        try:
            if not match or not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.geteuid():
                continue
        except OSError:
            continue
        path = Path(entry.path)
        try:
            fd = _lock(path)
        except OSError:
            continue
        if fd is None:  # a live writer holds it
            continue
        try:
            previous, destination = path / _PREVIOUS, parent / match["name"]
            if match["role"] == "old" and previous.is_dir() and not os.path.lexists(destination):
                os.rename(previous, destination)  # killed mid-swap: the previous folder goes back
            shutil.rmtree(path, ignore_errors=True)
            done.append(path)
        except OSError:
            pass
        finally:
            _unlock(fd)
    return done


def friendly_os_error(exc: OSError, path: Path, what: str) -> OSError:
    """An OSError naming the user's path and what to do, not poslab's temporary."""
    reasons = {errno.EACCES: "permission denied", errno.EPERM: "permission denied",
               errno.EROFS: "the file system is read-only", errno.ENOSPC: "no space left on the device",
               errno.EDQUOT: "disk quota exceeded", errno.EFBIG: "a file exceeds the file size limit", errno.ENOTDIR: "a part of the path is a file, not a folder",
               errno.ENAMETOOLONG: "the name is too long", errno.ELOOP: "too many levels of symbolic links"}
    if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
        error = type(exc)(f"{what} {path} appeared while poslab was writing it; nothing was replaced. "
                          "Choose another --out, or remove it and run again")
    else:
        reason = reasons.get(exc.errno, exc.strerror or str(exc))
        error = type(exc)(f"cannot write {what} {path}: {reason}; choose another --out, "
                          "or fix the permissions / free some space")
    error.errno = exc.errno
    return error


def check_can_create(out, *, what: str = "folder") -> Path:
    """Check, before any work, that the folder ``out`` can be created: make its parents and try a temporary there.

    Returns the absolute path. Raises OSError naming ``out`` (not a temporary) and the reason.
    """
    out = Path(os.path.abspath(Path(out).expanduser()))
    if os.path.islink(out) and not out.exists():
        raise FileNotFoundError(f"{what} {out} is a symbolic link to {os.readlink(out)}, which does not exist; "
                                "remove the link or choose another --out")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        probe, fd = _temporary(out.parent, out.name, "tmp")
    except FileExistsError:
        raise FileExistsError(f"cannot write {what} {out}: a part of its parent path is a file, not a folder; "
                              "choose another --out") from None
    except OSError as exc:
        raise friendly_os_error(exc, out, what) from None
    _unlock(fd)
    probe.rmdir()
    return out


class AtomicFolder:
    """Build the folder ``out`` under a temporary name beside it and rename it into place on :meth:`commit`.

    Usage::

        with AtomicFolder(out) as folder:
            (folder.path / "a.csv").write_text(...)
            folder.commit(check=lambda: ...)      # rename into place; the previous ``out`` is replaced

    Leaving the block without :meth:`commit` (an error, Ctrl-C) removes the
    temporary folder; ``out`` is untouched. Entering removes stale poslab
    temporaries in the same parent folder (:func:`remove_stale_temporaries`).

    Parameters
    ----------
    out : path
        The destination (absolute after construction). Its parent is created.
    what : str
        What to call it in messages ("results folder", "run folder").
    """

    def __init__(self, out, *, what: str = "folder"):
        self.out = Path(os.path.abspath(Path(out).expanduser()))
        self.what = what
        self.path: Path | None = None
        self._fd: int | None = None

    def __enter__(self) -> AtomicFolder:
        try:
            self.out.parent.mkdir(parents=True, exist_ok=True)
            remove_stale_temporaries(self.out.parent)
            self.path, self._fd = _temporary(self.out.parent, self.out.name, "tmp")
        except OSError as exc:
            raise friendly_os_error(exc, self.out, self.what) from None
        umask = os.umask(0)
        os.umask(umask)
        self.path.chmod(0o777 & ~umask)  # mkdtemp makes it private; the result is an ordinary folder
        return self

    def commit(self, *, check=None) -> Path:
        """Rename the temporary folder to ``out``, replacing what ``out`` held.

        Parameters
        ----------
        check : callable, optional
            Called just before the swap (e.g. to re-check that ``out`` may
            still be replaced); an exception from it aborts the commit.
        """
        if check is not None:
            check()
        old = fd_old = None
        swapped = False
        try:
            if os.path.lexists(self.out):
                old, fd_old = _temporary(self.out.parent, self.out.name, "old")
                os.replace(self.out, old / _PREVIOUS)
            try:
                os.rename(self.path, self.out)  # never replaces a non-empty folder that appeared meanwhile
                swapped = True
            except BaseException:
                if old is not None:
                    os.replace(old / _PREVIOUS, self.out)  # put the previous folder back
                raise
        except OSError as exc:
            raise friendly_os_error(exc, self.out, self.what) from None
        finally:
            # if putting it back failed, the previous folder stays in `old`: the next write renames it back
            if old is not None and (swapped or not os.path.lexists(old / _PREVIOUS)):
                shutil.rmtree(old, ignore_errors=True)
            _unlock(fd_old)
        self.path = None
        _unlock(self._fd)
        self._fd = None
        return self.out

    def __exit__(self, *exc) -> bool:
        if self.path is not None:
            _discard(self.path, self.out)
            self.path = None
        _unlock(self._fd)
        self._fd = None
        return False
