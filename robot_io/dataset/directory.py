"""Where a recorded dataset goes, so that nothing a user owns is touched and no reader ever sees half a run.

A run writes into DIR.partial, next to DIR (a symbolic link DIR is followed first: DIR.partial goes next to the
directory it points to, so that the commit is a rename on one file system). The first file in DIR.partial is
MARKER (VLASH_RUN), which records a run id drawn when the run created it. When the run closes:
    DIR absent or empty           MARKER is removed and DIR.partial renamed to DIR: one atomic rename
    DIR a dataset vlash wrote     the run is appended: its files (all new names but the metadata LeRobot reads:
                                  tasks.parquet, stats.json, info.json) are moved in, info.json last, after a journal
                                  (DIR.partial/COMMIT: the run id and the files) that lets the next run finish a
                                  commit a kill cut short
A journal is replayed only when vlash can prove it wrote it: COMMIT is the JSON it writes, its run id is the one
MARKER recorded, its files are relative paths inside DIR.partial, and DIR.partial holds nothing else. Anything else
is refused in one line, and nothing is touched: vlash never removes a DIR.partial it cannot prove is its own.
A run killed before it closes leaves DIR as it was and DIR.partial behind (no dataset: remove it to record to DIR
again). Refused before the run, in one line: DIR is a file, or a non-empty directory that is not a dataset vlash
wrote (its meta/info.json and meta/vlash/), or DIR.partial exists without a journal vlash wrote (another run
writes it, or one was killed, or it is not vlash's).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

from robot_io.dataset.layout import INFO_PATH, VLASH_DIR
from robot_io.protocol.errors import RobotIOError

JOURNAL = "COMMIT"
MARKER = "VLASH_RUN"
MARKER_FORMAT = "vlash.dataset-run/1"


class DatasetError(RobotIOError):
    """A run cannot be recorded as a dataset (a directory not ours or in use, a missing extra, a dataset of another
    shape to append to); says why in one line."""


def real_target(target: Path) -> Path:
    """DIR as an absolute path, "." and ".." resolved and a symbolic link followed (its directory is recorded to)."""
    return Path(os.path.realpath(target))


def partial_path(target: Path) -> Path:
    """DIR.partial, next to (the real) DIR, so that the commit is a rename on one file system."""
    target = real_target(target)
    return target.with_name(target.name + ".partial")


def is_vlash_dataset(target: Path) -> bool:
    return (target / INFO_PATH).is_file() and (target / VLASH_DIR).is_dir()


def check_target(target: Path) -> bool:
    """Whether a run appends to `target` (True) or creates it (False); DatasetError when it may do neither."""
    target, partial = real_target(target), partial_path(target)
    if partial.exists() or partial.is_symlink():
        if not (partial / JOURNAL).is_file():
            raise DatasetError(f"{partial} exists: another run is recording there, or one was killed before it "
                               "finished (its frames are not a dataset); remove it to record here")  # fmt: skip
        journal_files(partial)  # a journal vlash cannot prove it wrote is refused here, before the run
    if target.exists() and not target.is_dir():
        raise DatasetError(f"{target} is a file; give a directory")
    if not target.exists() or not any(target.iterdir()):
        return (partial / JOURNAL).is_file()  # an interrupted commit made it a dataset: it is finished first
    if not is_vlash_dataset(target):
        raise DatasetError(f"{target} is not empty and is not a dataset vlash recorded; give a new directory")
    return True


def open_partial(target: Path) -> tuple[Path, bool]:
    """Finish a commit a kill interrupted, check `target`, create DIR.partial with its MARKER; (DIR.partial,
    appending)."""
    target, partial = real_target(target), partial_path(target)
    if (partial / JOURNAL).is_file():
        _move_in(partial, target, journal_files(partial))
    appending = check_target(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        partial.mkdir()
    except FileExistsError:
        raise DatasetError(f"{partial} exists: another run is recording there") from None
    _write_json(partial / MARKER, {"format": MARKER_FORMAT, "run": uuid.uuid4().hex})
    return partial, appending


def commit(partial: Path, target: Path, appending: bool) -> None:
    """Make the run in `partial` part of `target` (module doc)."""
    run = _run_id(partial)
    if run is None:
        raise DatasetError(f"{partial}/{MARKER} is gone or not vlash's: the run is left in {partial}")
    if not appending:
        (partial / MARKER).unlink()
        os.rename(partial, target)  # atomic; onto an empty directory too (POSIX)
        return
    files = sorted(str(p.relative_to(partial)) for p in partial.rglob("*") if p.is_file())
    files = [name for name in files if name != MARKER]
    files.sort(key=lambda name: name == INFO_PATH)  # info.json, which says how many frames there are, last
    _write_json(partial / JOURNAL, {"run": run, "files": files})
    _move_in(partial, target, files)


def journal_files(partial: Path) -> list[str]:
    """The files of a journal vlash wrote (module doc); DatasetError, with nothing touched, for any other."""
    journal = partial / JOURNAL
    refused = (f"{journal} was not written by vlash for the run in {partial} ({{}}); nothing was touched: look at "
               f"what {partial} holds and remove it yourself to record here")  # fmt: skip
    run = _run_id(partial)
    if partial.is_symlink() or run is None:
        raise DatasetError(refused.format(f"no {MARKER} with the run id vlash records when it creates the folder"))
    try:
        doc = json.loads(journal.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DatasetError(refused.format(f"not JSON: {exc}")) from None
    files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(files, list) or not all(isinstance(f, str) and _inside(f) for f in files):
        raise DatasetError(refused.format('not {"run": ID, "files": [paths inside it]}'))
    if doc.get("run") != run:
        raise DatasetError(refused.format(f"its run id is not {MARKER}'s"))
    owned = {JOURNAL, MARKER, *files} | {str(parent) for f in files for parent in Path(f).parents}
    names = sorted(str(p.relative_to(partial)) for p in partial.rglob("*"))
    foreign = [name for name in names if name not in owned]
    if foreign:
        raise DatasetError(refused.format(f"it also holds {foreign[0]}, which the journal does not list"))
    return files


def _move_in(partial: Path, target: Path, files: list[str]) -> None:
    """Move the journal's files that are still in `partial` into `target` (idempotent), then remove the journal,
    MARKER and the folders left empty: `partial` is gone, having held nothing else (`journal_files`)."""
    for name in files:
        source = partial / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target / name)
    (partial / JOURNAL).unlink()  # first: a MARKER alone says "a killed run", never "a journal not ours"
    (partial / MARKER).unlink()
    for folder in sorted((p for p in partial.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        folder.rmdir()  # empty: an entry left in it (not ours) stops here, with an error, and is kept
    partial.rmdir()


def discard(partial: Path) -> None:
    """Remove a run's DIR.partial that holds no dataset (nothing recorded, or writing failed): ours, not the user's
    (this run created it: it holds this run's MARKER)."""
    if _run_id(partial) is not None:
        shutil.rmtree(partial, ignore_errors=True)


def _run_id(partial: Path) -> str | None:
    """The run id in `partial`'s MARKER, or None when it has no MARKER vlash wrote."""
    try:
        doc = json.loads((partial / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(doc, dict) and doc.get("format") == MARKER_FORMAT and isinstance(doc.get("run"), str)
    return doc["run"] if ok and doc["run"] else None


def _inside(name: str) -> bool:
    """A relative path with no ".." part: it names a file inside DIR.partial (and inside DIR, once moved)."""
    path = Path(name)
    return bool(name) and not path.is_absolute() and ".." not in path.parts and name not in (JOURNAL, MARKER)


def _write_json(path: Path, doc: object) -> None:
    """`doc` written whole into `path`, or not at all (temp file, fsync, rename)."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        json.dump(doc, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
