"""Where vlash's data files are: `configs/<kind>` in a repository checkout, `vlash/configs/<kind>` in an
installed wheel (pyproject's package-dir installs configs/policies and configs/devices there)."""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def config_dir(kind: str) -> Path:
    """The folder of `kind` configs ("policies", "devices", "eval"): the installed copy if there is one, else the
    checkout's."""
    for base in (PACKAGE_DIR / "configs", PACKAGE_DIR.parent / "configs"):
        if (base / kind).is_dir():
            return base / kind
    return PACKAGE_DIR.parent / "configs" / kind  # missing: callers report the presets they find (none)
