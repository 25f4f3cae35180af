"""Where a recorded dataset goes, so that nothing a user owns is touched and no reader ever sees half a run.

A run writes into DIR.partial, next to DIR. When it closes:
    DIR absent or empty           DIR.partial is renamed to DIR: one atomic rename
    DIR a dataset vlash wrote     the run is appended: its files (all new names but the metadata LeRobot reads:
                                  tasks.parquet, stats.json, info.json) are moved in, info.json last, after a journal
                                  (DIR.partial/COMMIT) that lets the next run finish a commit a kill cut short
A run killed before it closes leaves DIR as it was and DIR.partial behind (no dataset: remove it to record to DIR
again). Refused before the run, in one line: DIR is a file, or a non-empty directory that is not a dataset vlash
wrote (its meta/info.json and meta/vlash/), or DIR.partial exists without a journal (another run writes it, or one
was killed).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from robot_io.dataset.layout import INFO_PATH, VLASH_DIR
from robot_io.protocol.errors import RobotIOError

JOURNAL = "COMMIT"


class DatasetError(RobotIOError):
    """A run cannot be recorded as a dataset (a directory not ours or in use, a missing extra, a dataset of another
    shape to append to); says why in one line."""


def partial_path(target: Path) -> Path:
    """DIR.partial, next to DIR (so that the commit is a rename on one file system); "." and ".." resolved."""
    target = Path(os.path.abspath(target))
    return target.with_name(target.name + ".partial")


def is_vlash_dataset(target: Path) -> bool:
    return (target / INFO_PATH).is_file() and (target / VLASH_DIR).is_dir()


def check_target(target: Path) -> bool:
    """Whether a run appends to `target` (True) or creates it (False); DatasetError when it may do neither."""
    partial = partial_path(target)
    if partial.exists() and not (partial / JOURNAL).is_file():
        raise DatasetError(f"{partial} exists: another run is recording there, or one was killed before it "
                              "finished (its frames are not a dataset); remove it to record here")  # fmt: skip
    if target.is_file():
        raise DatasetError(f"{target} is a file; give a directory")
    if not target.exists() or not any(target.iterdir()):
        return (partial / JOURNAL).is_file()  # an interrupted commit made it a dataset: it is finished first
    if not is_vlash_dataset(target):
        raise DatasetError(f"{target} is not empty and is not a dataset vlash recorded; give a new directory")
    return True


def open_partial(target: Path) -> tuple[Path, bool]:
    """Finish a commit a kill interrupted, check `target`, create DIR.partial; (DIR.partial, appending)."""
    partial = partial_path(target)
    if (partial / JOURNAL).is_file():
        _move_in(partial, target)
    appending = check_target(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        partial.mkdir()
    except FileExistsError:
        raise DatasetError(f"{partial} exists: another run is recording there") from None
    return partial, appending


def commit(partial: Path, target: Path, appending: bool) -> None:
    """Make the run in `partial` part of `target` (module doc)."""
    if not appending:
        os.rename(partial, target)  # atomic; onto an empty directory too (POSIX)
        return
    files = sorted(str(p.relative_to(partial)) for p in partial.rglob("*") if p.is_file())
    files.sort(key=lambda name: name == INFO_PATH)  # info.json, which says how many frames there are, last
    journal = partial / JOURNAL
    tmp = journal.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        json.dump(files, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, journal)
    _move_in(partial, target)


def _move_in(partial: Path, target: Path) -> None:
    """Move the journal's files that are still in `partial` into `target` (idempotent), then remove `partial`."""
    journal = partial / JOURNAL
    for name in json.loads(journal.read_text(encoding="utf-8")):
        source = partial / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target / name)
    journal.unlink()
    shutil.rmtree(partial)  # only empty folders are left: ours


def discard(partial: Path) -> None:
    """Remove a run's DIR.partial that holds no dataset (nothing recorded, or writing failed): ours, not the user's."""
    shutil.rmtree(partial, ignore_errors=True)
