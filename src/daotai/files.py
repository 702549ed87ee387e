"""Atomic file writes and file hashes (bottom layer: standard library only).

Every file daotai writes goes to a hidden temp sibling in the target folder and is renamed
onto the target only once it is complete, so a reader never sees a half-written file at the
output path, even if the process dies. One naming scheme everywhere::

    <folder>/.<name>.<8 hex digits>.partial<suffix>      e.g. .s01.mp4.1f0c9a3e.partial.mp4

The random part lets two writers of one target never share a temp file; the target's
suffix is kept at the end so tools that choose a format from the file name (the muxer of
:mod:`daotai.encode.video`) see the same suffix. A killed process cannot clean up; its
leftovers are found again by :func:`temp_files_for` / :func:`remove_temp_files`.

Whole folders are replaced the same way: a render fills a hidden staging sibling of its
output folder (:func:`staging_folder`, ``.<name>.daotai-staging-<8 hex>``) and
:func:`swap_folder` puts it in the folder's place at the end, so a reader sees the old folder
or the new one, never a mix. On Linux the two are exchanged in one ``renameat2`` call; where
the OS cannot exchange, the old folder is renamed aside first and the new one renamed in (a
crash between the two leaves the old folder whole under its aside name).

Because no file is ever written in place (every writer makes a new file and renames it onto
the target), one file may safely appear under two names: :func:`link_or_copy` hard-links a
finished file (a shot cache entry) into an output folder where the file system allows it, and
a later write to either name replaces that name's file without touching the other.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import os
import re
import secrets
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TEMP_MARK = ".partial"
_TEMP_NAME = re.compile(r"^\.(?P<name>.+)\.[0-9a-f]{8}" + re.escape(TEMP_MARK) + r"(?P<suffix>(\.[^.]*)?)$")


def temp_path(target: str | os.PathLike[str]) -> Path:
    """A fresh hidden temp sibling of ``target``: ``.<name>.<8 hex>.partial<suffix>``."""
    path = Path(target)
    return path.with_name(f".{path.name}.{secrets.token_hex(4)}{TEMP_MARK}{path.suffix}")


def is_temp_for(entry: str | os.PathLike[str], target: str | os.PathLike[str]) -> bool:
    """Whether ``entry`` (a name or path) is a temp file made by :func:`temp_path` for ``target``."""
    match = _TEMP_NAME.match(Path(entry).name)
    path = Path(target)
    return bool(match) and match["name"] == path.name and match["suffix"] == path.suffix


def temp_files_for(target: str | os.PathLike[str]) -> list[Path]:
    """Temp siblings of ``target`` that exist now (a writer in progress, or one that died)."""
    folder = Path(target).parent
    if not folder.is_dir():
        return []
    return sorted(entry for entry in folder.iterdir() if is_temp_for(entry.name, target))


def remove_quietly(path: str | os.PathLike[str]) -> None:
    """Delete a temp file or folder if it exists (cleanup never raises over the original error)."""
    entry = Path(path)
    try:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    except OSError:
        pass


def remove_temp_files(target: str | os.PathLike[str]) -> int:
    """Delete the temp siblings a killed writer left for ``target``; returns how many."""
    found = temp_files_for(target)
    for entry in found:
        remove_quietly(entry)
    return len(found)


def _fsync_file(path: Path) -> None:
    """Flush a finished file's data to disk (the rename must never expose unwritten data)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish(temp: str | os.PathLike[str], target: str | os.PathLike[str]) -> Path:
    """Move a finished temp file (or folder) onto ``target`` atomically; files are fsynced first."""
    source, final = Path(temp), Path(target)
    if source.is_file():
        _fsync_file(source)
    os.replace(source, final)
    return final


@contextmanager
def atomic_path(target: str | os.PathLike[str]) -> Iterator[Path]:
    """A temp path beside ``target``; renamed onto it when the block ends cleanly, removed on failure.

    The block creates the file (or a folder) at the yielded path. On any exception,
    KeyboardInterrupt included, the temp is removed and ``target`` is left as it was. The
    target's folder is created if missing.
    """
    final = Path(target)
    final.parent.mkdir(parents=True, exist_ok=True)
    temp = temp_path(final)
    try:
        yield temp
        publish(temp, final)
    except BaseException:
        remove_quietly(temp)
        raise


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write bytes to ``path`` through a temp file in the same folder and an atomic rename."""
    with atomic_path(path) as temp:
        # O_EXCL: never write into someone else's file; mode 0o666 less the umask, as open() gives.
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """UTF-8 text version of :func:`atomic_write_bytes`."""
    return atomic_write_bytes(path, text.encode("utf-8"))


STAGING_MARK = ".daotai-staging-"  # a render's folder while it is being filled
ASIDE_MARK = ".daotai-old-"  # the folder a render replaced, between the swap and its removal


def staging_folder(target: str | os.PathLike[str]) -> Path:
    """A fresh hidden sibling of the folder ``target`` (same file system, so it can be renamed
    onto it): ``.<name>.daotai-staging-<8 hex>``; not created."""
    path = Path(target)
    return path.with_name(f".{path.name}{STAGING_MARK}{secrets.token_hex(4)}")


def siblings_of(target: str | os.PathLike[str], mark: str) -> list[Path]:
    """Hidden siblings of ``target`` named with ``mark`` (:data:`STAGING_MARK`, :data:`ASIDE_MARK`)."""
    path = Path(target)
    if not path.parent.is_dir():
        return []
    prefix = f".{path.name}{mark}"
    return sorted(entry for entry in path.parent.iterdir()
                  if entry.name.startswith(prefix) and re.fullmatch(r"[0-9a-f]{8}", entry.name[len(prefix):]))


_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


def exchange_paths(first: str | os.PathLike[str], second: str | os.PathLike[str]) -> bool:
    """Swap two existing paths in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``);
    False where the OS or file system cannot, OSError when the exchange itself fails."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # a C library without renameat2 (glibc < 2.28, musl)
        return False
    renameat2.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
    if renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(second))


def swap_folder(staging: str | os.PathLike[str], target: str | os.PathLike[str],
                keep_old: str | os.PathLike[str] | None = None) -> None:
    """Put the complete folder ``staging`` in the place of ``target``.

    The folder that was at ``target`` (if any) is removed afterwards, or renamed to
    ``keep_old`` when given (it holds files that are not ours to delete). A reader of
    ``target`` sees the old folder or the new one, never a mix of the two.
    """
    new, final = Path(staging), Path(target)
    if not final.exists() and not final.is_symlink():
        os.replace(new, final)
        return
    if exchange_paths(new, final):
        old = new  # the staging name now holds the replaced folder
    else:
        old = final.with_name(f".{final.name}{ASIDE_MARK}{secrets.token_hex(4)}")
        os.replace(final, old)
        try:
            os.replace(new, final)
        except BaseException:
            os.replace(old, final)  # put the old folder back: the target is never left missing
            raise
    if keep_old is not None:
        os.replace(old, keep_old)
    else:
        remove_quietly(old)


# Why os.link may refuse where a copy works: another file system (EXDEV), a file system without
# hard links or one that forbids them here (EPERM, EOPNOTSUPP, ENOSYS, EACCES), too many links (EMLINK).
_NO_LINK_ERRNOS = frozenset({errno.EXDEV, errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS,
                             errno.EACCES, errno.EMLINK})


def link_or_copy(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> bool:
    """Give the finished file ``source`` a second name ``target`` (which must not exist): a hard
    link where the file system allows one, else a copy. True when linked (no bytes were written).

    Safe only for files nobody writes in place: daotai never does (see the module's docstring).
    """
    try:
        os.link(source, target)
        return True
    except OSError as exc:
        if exc.errno not in _NO_LINK_ERRNOS:
            raise
    shutil.copyfile(source, target)
    return False


def target_of_temp(path: str | os.PathLike[str]) -> Path | None:
    """The file a temp file made by :func:`temp_path` stands for; None for any other name."""
    entry = Path(path)
    match = _TEMP_NAME.match(entry.name)
    return entry.with_name(match["name"]) if match else None


def sha256_file(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


__all__ = [
    "ASIDE_MARK", "STAGING_MARK", "TEMP_MARK", "atomic_path", "atomic_write_bytes", "atomic_write_text",
    "exchange_paths", "is_temp_for", "link_or_copy", "publish", "remove_quietly", "remove_temp_files", "sha256_file",
    "siblings_of", "staging_folder", "swap_folder", "target_of_temp", "temp_path", "temp_files_for",
]


def default_cache_dir() -> Path:
    """The user's daotai cache folder, where the shot cache and what is learned about this machine and
    its models are kept ($DAOTAI_CACHE_DIR, else the platform's cache folder)."""
    if os.environ.get("DAOTAI_CACHE_DIR"):
        return Path(os.environ["DAOTAI_CACHE_DIR"]).expanduser()
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "daotai" / "shots"
    if os.name == "nt":
        return Path(os.environ.get("LOCALAPPDATA", Path.home())) / "daotai" / "cache" / "shots"
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "daotai" / "shots"
