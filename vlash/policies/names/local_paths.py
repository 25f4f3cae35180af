"""Local paths told from Hugging Face repo ids, and the folder a mistyped path most likely meant.

`owner/name` has the shape of a repo id and of a relative path alike. It is a path when a local folder explains it
better: its parent folder exists here (`checkpoints/pi05-tiny-simm`: checkpoints/ exists), or its first part is a
near miss of a folder here (`checkpont/pi05-tiny-sim`); only otherwise is it looked up on the Hub. A value that
starts with `./`, `../`, `/` or `~` is never a repo id (vlash.policies.names.hub.looks_like_hub_id).

    local_reason("checkpoints/pi05-tiny-simm")    # "checkpoints/ exists here"
    closest_existing("checkpoints/pi05-tiny-simm")  # "checkpoints/pi05-tiny-sim"
"""

from __future__ import annotations

import difflib
from pathlib import Path

CUTOFF = 0.8  # difflib ratio for a near miss: one or two characters off in a folder name
SCAN_LIMIT = 2000  # entries of one folder compared at most (a huge folder is not listed whole for a hint)


def _entries(folder: Path, dirs_only: bool) -> list[str]:
    names = []
    try:
        for i, entry in enumerate(folder.iterdir()):
            if i >= SCAN_LIMIT:
                break
            if not dirs_only or entry.is_dir():
                names.append(entry.name)
    except OSError:
        return []
    return names


def _near_miss(folder: Path, name: str, dirs_only: bool) -> str | None:
    matches = difflib.get_close_matches(name, _entries(folder, dirs_only), n=1, cutoff=CUTOFF)
    return matches[0] if matches else None


def local_reason(value: str) -> str | None:
    """Why `value` (shaped like `owner/name`, no such path here) reads as a local path, or None: its parent folder
    exists here, or its first part is a near miss of a folder here."""
    path = Path(value).expanduser()
    first = path.parts[0] if path.parts else ""
    if path.parent != Path(".") and path.parent.is_dir():
        return f"{path.parent}/ exists here"
    near = _near_miss(Path("."), first, dirs_only=True) if first else None
    if near is not None and near != first:
        return f"{first}/ is a near miss of {near}/, which exists here"
    return None


def closest_existing(value: str, dirs_only: bool = True) -> str | None:
    """The existing path closest to the missing `value`: from its deepest existing folder down, each missing part
    replaced by its near miss there (a folder; with `dirs_only` False a file too), as far as near misses go. None
    when the first missing part has no near miss."""
    path = Path(value).expanduser()
    base = Path(path.anchor) if path.is_absolute() else Path(".")
    parts = path.parts[1:] if path.is_absolute() else path.parts
    found, replaced = base, False
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if (found / part).is_dir() or (last and not dirs_only and (found / part).exists()):
            found = found / part
            continue
        near = _near_miss(found, part, dirs_only=dirs_only or not last)
        if near is None:
            break
        found, replaced = found / near, True
    return str(found) if replaced else None


def missing_path_hint(value: str, dirs_only: bool = True) -> str:
    """ "; did you mean 'checkpoints/pi05-tiny-sim'?" for a near miss, else ""."""
    closest = closest_existing(value, dirs_only)
    return f"; did you mean {closest!r}?" if closest is not None else ""
