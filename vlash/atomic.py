"""Write files and directories so a reader sees the old version or the new one, never half of either, and replace
only what vlash wrote.

Every output directory vlash writes whole (a policy directory, a training run, a quantized policy, an engine
artifact) is published by `staged_directory`, which lists the entries it wrote in the directory's FILE_LIST
(vlash_files.json). Replacing the directory later is allowed only when everything in it is listed there
(`check_replaceable`); a file or folder the user added, hidden ones included, makes the directory theirs, and it is
refused in one line that names the first such entry (in sorted order). A directory without FILE_LIST was written by
someone else or by an older vlash, which did not list its files; it is refused too, since vlash cannot tell its own
files there from the user's: the line says to remove it (or give a new directory), which only its owner should do.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from vlash.errors import ConfigError

FILE_LIST = "vlash_files.json"  # in every output directory vlash writes: the entries it wrote there
FILE_LIST_FORMAT = "vlash.files/1"


def _umask() -> int:
    """The process umask: from /proc on Linux, else by setting and restoring it (os has no getter)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _chmod_default(path: str | Path, directory: bool) -> None:
    """mkstemp/mkdtemp (and safetensors' save_file) create 0600/0700 entries; give the result the mode a plain
    open()/mkdir() would, so a policy trained by one user can be served by another."""
    os.chmod(path, (0o777 if directory else 0o666) & ~_umask())


def atomic_write(target: str | os.PathLike[str], write: Callable[[BinaryIO], object]) -> Path:
    """Call `write(f)` on a temp file next to `target`, fsync it, then rename it over `target`."""

    def save(tmp: str) -> None:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())

    return atomic_save(target, save)


def atomic_save(target: str | os.PathLike[str], save: Callable[[str], object]) -> Path:
    """`atomic_write` for writers that take a path, not a file (safetensors' save_file): `save(tmp_path)`, then the
    file gets an ordinary file's mode and is renamed over `target`."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        save(tmp)
        _chmod_default(tmp, directory=False)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _entries(directory: Path) -> list[str]:
    """Every entry under `directory`, as sorted relative POSIX paths, folders with a trailing "/" (symbolic links
    are entries, never followed)."""
    found: list[str] = []

    def walk(folder: Path, prefix: str) -> None:
        with os.scandir(folder) as scan:
            for entry in scan:
                if entry.is_dir(follow_symlinks=False):
                    found.append(f"{prefix}{entry.name}/")
                    walk(Path(entry.path), f"{prefix}{entry.name}/")
                else:
                    found.append(prefix + entry.name)

    walk(directory, "")
    return sorted(found)


def listed_entries(directory: str | os.PathLike[str]) -> set[str] | None:
    """The entries `directory`'s FILE_LIST says vlash wrote there, or None when it has no readable one."""
    try:
        doc = json.loads((Path(directory) / FILE_LIST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != FILE_LIST_FORMAT or not isinstance(doc.get("files"), list):
        return None
    return {name for name in doc["files"] if isinstance(name, str)} | {FILE_LIST}


def check_replaceable(target: str | os.PathLike[str], flag: str | None = None) -> None:
    """ConfigError (one line) unless `target` may be replaced whole: missing, empty, or holding only the entries its
    FILE_LIST names (module doc). `flag`: the option that named it, for the message."""
    target = Path(target)
    name = f"{flag} {str(target)!r}" if flag else repr(str(target))
    if target.exists() and not target.is_dir():
        raise ConfigError(f"{name} is a file, not a directory")
    if not target.is_dir() or not any(target.iterdir()):
        return
    fix = f"give a new {flag}" if flag else "give a new directory"
    listed = listed_entries(target)
    if listed is None:
        raise ConfigError(
            f"{name} has no {FILE_LIST}: vlash did not write it, or an older vlash did (it did not list its files), "
            f"so nothing in it is replaced, even with --overwrite: remove it yourself or {fix}"
        )
    foreign = next((entry for entry in _entries(target) if entry not in listed), None)
    if foreign is not None:
        raise ConfigError(
            f"{name} holds {foreign}, which vlash did not write ({FILE_LIST} lists what it did); a directory with "
            f"your files in it is never replaced, even with --overwrite: move {foreign} out or {fix}"
        )


def _write_file_list(staging: Path) -> None:
    doc = {"format": FILE_LIST_FORMAT, "files": _entries(staging)}
    (staging / FILE_LIST).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def _sibling(target: Path, tag: str) -> Path:
    """A new empty folder next to `target`, named after it (for a rename onto it: same file system)."""
    path = Path(tempfile.mkdtemp(prefix=f".{target.name}.{tag}.", dir=target.parent))
    _chmod_default(path, directory=True)
    return path


@contextmanager
def staged_directory(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield an empty staging directory next to `target`; on normal exit FILE_LIST is written into it and it
    replaces `target` whole, on an exception (or Ctrl-C) it is deleted and `target` is left as it was. `target`
    must be replaceable (`check_replaceable`) when the work is done: if it is not (the user put a file there while
    this ran), it is left as it is and what was written is kept next to it (the error says where). A symbolic link
    to a directory is followed: the directory it points to is replaced, the link kept."""
    target = Path(target)
    if target.is_symlink():
        target = target.resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = _sibling(target, "staging")
    try:
        yield staging
        _write_file_list(staging)
        _publish(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _publish(staging: Path, target: Path) -> None:
    try:
        check_replaceable(target)
    except ConfigError as exc:
        kept = target.with_name(f"{target.name}.new")
        kept = kept if not kept.exists() else Path(tempfile.mkdtemp(prefix=f"{target.name}.new-", dir=target.parent))
        os.rename(staging, kept)  # onto the empty folder mkdtemp made, if any
        raise ConfigError(f"{exc}; what this run wrote is kept in {str(kept)!r}") from None
    if not target.exists() or not any(target.iterdir()):
        os.rename(staging, target)  # atomic; onto an empty directory too (POSIX)
        return
    old = _sibling(target, "old")
    os.rename(target, old)  # onto the empty folder: a unique name, never one the user has
    os.rename(staging, target)
    shutil.rmtree(old)
