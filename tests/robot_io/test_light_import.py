"""robot_io runs on robot computers: it must import with numpy + pyzmq + msgspec only."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from robot_io import ArraySpec, ShapeError

# Modules that must be importable on a robot computer (the walk below imports every module; this list
# makes sure the important ones exist and were reached).
REQUIRED_MODULES = (
    "robot_io.protocol",
    "robot_io.protocol.messages",
    "robot_io.protocol.codec",
    "robot_io.protocol.limits",
    "robot_io.protocol.curve",
    "robot_io.client",
)

BLOCKER = textwrap.dedent(
    """
    import importlib.abc, sys
    HEAVY = ("torch", "vlash", "engines", "quant", "safetensors", "tokenizers", "yaml", "cv2", "onnxruntime")
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in HEAVY:
                raise ImportError(f"blocked heavy import: {name}")
    sys.meta_path.insert(0, Block())
    REQUIRED = {required!r}
    import robot_io, pkgutil, importlib
    for mod in pkgutil.walk_packages(robot_io.__path__, "robot_io."):
        if mod.name.split(".")[1] != "sim":  # the simulation extra may use OpenCV
            importlib.import_module(mod.name)
    loaded = sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY))
    assert not loaded, loaded
    missing = [m for m in REQUIRED if m not in sys.modules]
    assert not missing, f"not imported by the walk: {missing}"
    print("ok", len(sys.modules))
    """
).replace("{required!r}", repr(REQUIRED_MODULES))


def test_robot_io_imports_without_torch():
    out = subprocess.run([sys.executable, "-c", BLOCKER], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok")


def test_array_spec_validates_and_names_the_field():
    spec = ArraySpec("observation.state", (None, 6), "float32")
    spec.validate(np.zeros((2, 6), np.float32))
    with pytest.raises(ShapeError, match=r"observation.state: expected shape \(\*, 6\), got \(2, 5\)"):
        spec.validate(np.zeros((2, 5), np.float32))
    with pytest.raises(ShapeError, match="dtype float32, got float64"):
        spec.validate(np.zeros((2, 6)))
    with pytest.raises(ShapeError, match="NaN or inf"):
        spec.validate(np.full((1, 6), np.nan, np.float32))
    with pytest.raises(ShapeError, match="numpy array"):
        spec.validate([0.0] * 6)
    assert spec.validate(spec.example()).shape == (1, 6)
    with pytest.raises(ValueError, match="unknown dtype"):
        ArraySpec("x", (1,), "floaty")
