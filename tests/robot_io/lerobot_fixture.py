"""The fake LeRobot of tests/fixtures/fake_lerobot (with its fake draccus) on sys.path for one test only."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

FAKE_LEROBOT = Path(__file__).resolve().parents[1] / "fixtures" / "fake_lerobot"
ROOT = Path(__file__).resolve().parents[2]
SO101_YAML = ROOT / "configs" / "robots" / "so101.yaml"


def _drop_modules() -> None:
    for name in [m for m in sys.modules if m.split(".")[0] in ("lerobot", "draccus")]:
        del sys.modules[name]


@contextmanager
def fake_lerobot_on_path() -> Iterator[Path]:
    """`import lerobot` / `import draccus` find the fakes inside the block, and nothing after it."""
    _drop_modules()
    sys.path.insert(0, str(FAKE_LEROBOT))
    importlib.invalidate_caches()
    try:
        yield FAKE_LEROBOT
    finally:
        sys.path.remove(str(FAKE_LEROBOT))
        _drop_modules()
        importlib.invalidate_caches()
