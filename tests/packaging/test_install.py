"""The two installs the README names, each into a fresh virtual environment from a wheel of this checkout:

- the robot side, `pip install vlash`, on Python 3.12 (LeRobot >= 0.5 needs it; found through pyenv or PATH, else
  this interpreter): no torch, no simulator; robot_io's tests pass against the installed package, the whole package
  byte-compiles and every module that needs no extra imports, `examples/run_client.py --help` and `vlash run
  --help` work, `vlash serve` names the extra it needs;
- the server side, `pip install 'vlash[server]'`: no simulator, gymnasium or OpenCV; `vlash serve --help`, and
  served round trips of the shipped task-space policy (its transform loads without the simulator's
  dependencies) and of a LeRobot checkpoint (pi0.5's presets come from the wheel).

CI runs this module as part of the suite: it is the robot-side and server-side install steps.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from robot_io.client import PolicyClient
from robot_io.protocol import Infer
from tests.serve_process import ServeProcess

pytestmark = [pytest.mark.slow, pytest.mark.install]
ROOT = Path(__file__).resolve().parents[2]
INSTALL_S = 900  # a fresh venv with torch from the local wheel: ~70 s here, more on a slow mirror


def _run(cmd: list[str], cwd: Path, timeout: float = INSTALL_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"{result.args}\nstdout: {result.stdout[-3000:]}\nstderr: {result.stderr[-3000:]}"
    return result.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    _ok(_run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", out, ROOT], ROOT))
    return next(out.glob("vlash-*.whl"))


def _robot_python() -> str:
    """Python 3.12 for the robot side (pyenv's, or one on PATH); this interpreter where there is none."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates = [*sorted(root.glob("versions/3.12*/bin/python3.12")), shutil.which("python3.12")]
    for python in filter(None, candidates):  # pyenv's shim on PATH may refuse to run: try each
        if subprocess.run([python, "--version"], capture_output=True, timeout=60).returncode == 0:
            return str(python)
    return sys.executable


# Every module of the installed package is imported; one may fail only by needing an extra's package.
IMPORT_ALL = """
import importlib, pkgutil, sys, robot_io, vlash
EXTRAS = {"torch", "safetensors", "tokenizers", "sentencepiece", "gymnasium", "cv2", "matplotlib", "rich", "onnx",
          "onnxruntime", "onnxscript", "tensorrt_rtx", "ray", "websockets", "jax", "orbax", "flax", "lerobot", "PIL",
          "starlette", "fastapi", "uvicorn", "huggingface_hub"}
imported, needs_extra = 0, 0
for package in (robot_io, vlash):
    for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        try:
            importlib.import_module(module.name)
            imported += 1
        except ModuleNotFoundError as exc:
            if exc.name.split(".")[0] not in EXTRAS:
                raise
            needs_extra += 1
print(sys.version_info[:2], imported, needs_extra)
"""


def _venv(where: Path, requirement: str, *extra: str, python: str = sys.executable) -> Path:
    _ok(_run([python, "-m", "venv", where], where.parent, timeout=300))
    python = where / "bin" / "python"
    constraints = ROOT / "constraints-dev.txt"
    _ok(_run([python, "-m", "pip", "install", "-q", "-c", constraints, requirement, *extra], where.parent))
    return python


def _importable(python: Path, module: str, cwd: Path) -> bool:
    return _run([python, "-c", f"import {module}"], cwd, timeout=120).returncode == 0


def test_the_wheel_installs_under_vlash_only(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.startswith("vlash-")}
    assert tops == {"vlash", "robot_io"}, tops
    for expected in ("vlash/engines/base.py", "vlash/quant/api.py", "vlash/configs/policies/pi05.yaml",
                     "vlash/configs/devices/cpu.yaml", "vlash/policies/processing/task_space.py"):  # fmt: skip
        assert expected in names, expected


@pytest.fixture(scope="module")
def envs(wheel, tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """Both sides' venvs, installed at once (pip is mostly one core; CI has two): side -> (python, an empty working
    directory). The robot side: `pip install vlash` + pytest; the server side: `pip install 'vlash[server]'`."""
    requirements = {
        "robot": (str(wheel), "pytest", "hypothesis", "msgpack"),  # msgpack: the tests build malformed frames with it
        "server": (f"vlash[server] @ {wheel.as_uri()}",),
    }
    pythons = {"robot": _robot_python(), "server": sys.executable}

    def install(side: str) -> tuple[Path, Path]:
        where = tmp_path_factory.mktemp(f"{side}-env")
        python = _venv(where / "venv", *requirements[side], python=pythons[side])
        (where / "work").mkdir()
        return python, where / "work"

    with ThreadPoolExecutor(2) as pool:
        return dict(zip(requirements, pool.map(install, requirements), strict=True))


@pytest.fixture(scope="module")
def robot_env(envs) -> tuple[Path, Path]:
    return envs["robot"]


def test_the_robot_side_installs_without_torch_and_its_tests_pass(robot_env):
    python, cwd = robot_env
    for heavy in ("torch", "safetensors", "tokenizers", "gymnasium", "cv2", "rich"):
        assert not _importable(python, heavy, cwd), f"{heavy} came with `pip install vlash`"
    assert _importable(python, "tyro", cwd)  # the command line's parser: a base dependency (vlash.cli.flags)
    walk = "import importlib, pkgutil, robot_io; print(robot_io.__file__)\n" + (
        "[importlib.import_module(m.name) for m in pkgutil.walk_packages(robot_io.__path__, 'robot_io.')]"
    )  # every robot_io module imports from the wheel (not this checkout): the simulator is vlash.sim
    assert "site-packages" in _ok(_run([python, "-c", walk], cwd, timeout=120))
    site = _ok(_run([python, "-c", "import vlash, pathlib; print(pathlib.Path(vlash.__file__).parents[1])"], cwd))
    _ok(_run([python, "-m", "compileall", "-q", Path(site.strip()) / "vlash", Path(site.strip()) / "robot_io"], cwd))
    version, imported, needs_extra = _ok(_run([python, "-c", IMPORT_ALL], cwd, timeout=300)).rsplit(maxsplit=2)
    if Path(_robot_python()).name == "python3.12":
        assert version == "(3, 12)", version
    assert int(imported) > 100 and int(needs_extra) > 50, (imported, needs_extra)
    # the robot side's tests, in this checkout, with only the robot side's dependencies installed
    tests = ["tests/robot_io", "tests/cli/test_run_cmd.py"]
    out = _ok(_run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], ROOT))
    assert " passed" in out and " failed" not in out, out[-2000:]


def test_the_robot_side_commands_run_and_server_commands_name_their_extra(robot_env):
    python, cwd = robot_env
    vlash = python.parent / "vlash"
    assert "--server" in _ok(_run([python, ROOT / "examples" / "run_client.py", "--help"], cwd, timeout=120))
    assert "--robot" in _ok(_run([vlash, "run", "--help"], cwd, timeout=120))
    assert "--checkpoint" in _ok(_run([vlash, "serve", "--help"], cwd, timeout=120))  # help needs no torch
    serve = _run([vlash, "serve", "--policy", "pi05-tiny", "--random-weights"], cwd, timeout=120)
    assert serve.returncode == 2 and "pip install 'vlash[server]'" in serve.stderr, serve.stderr


@pytest.fixture(scope="module")
def server_env(envs) -> tuple[Path, Path]:
    return envs["server"]


def _round_trip(endpoint: str, state_dim: int) -> np.ndarray:
    with PolicyClient(endpoint, timeout_s=60.0) as client:
        meta = client.connect()
        images = {c.name: np.zeros((c.height, c.width, 3), np.uint8) for c in meta.cameras}
        state = np.zeros(state_dim, np.float32)
        return client.infer(Infer(1, 0, time.time_ns(), "touch the red target", images, state, seed=3)).actions


def test_the_server_side_serves_without_the_simulator(server_env, tmp_path):
    python, cwd = server_env
    for absent in ("gymnasium", "cv2", "matplotlib", "onnxruntime"):
        assert not _importable(python, absent, cwd), f"{absent} came with `pip install 'vlash[server]'`"
    assert "--checkpoint" in _ok(_run([python.parent / "vlash", "serve", "--help"], cwd, timeout=120))
    server = ServeProcess(["--checkpoint", str(ROOT / "checkpoints" / "pi05-tiny-sim")], python=str(python), cwd=cwd)
    try:
        actions = _round_trip(server.endpoint, state_dim=2)
    finally:
        assert server.stop() == 0, server.err
    assert actions.shape == (50, 2) and np.isfinite(actions).all()


def test_the_server_side_serves_a_lerobot_checkpoint(server_env, tmp_path):
    from tests.checkpoints.layouts import Stats, write_lerobot
    from tests.policies.builders import train_wordlevel_tokenizer
    from vlash.policies.pi05 import load_preset
    from vlash.policies.pi05.weights import build_random

    python, cwd = server_env
    tokenizer = train_wordlevel_tokenizer(tmp_path / "tok") / "tokenizer.json"
    model = build_random(load_preset("pi05-tiny"), seed=2)
    path = write_lerobot(tmp_path / "lerobot", model, "head", Stats.random(6, 6), tokenizer, ["front"], relative=True)
    server = ServeProcess(["--checkpoint", str(path), "--model-config", "pi05-tiny"], python=str(python), cwd=cwd)
    try:
        actions = _round_trip(server.endpoint, state_dim=6)
    finally:
        assert server.stop() == 0, server.err
    assert actions.shape == (50, 6) and np.isfinite(actions).all()
