"""The README's "Serve your own pi0.5" commands, run as written, in a folder where the paths they name hold tiny
random-weight checkpoints of each layout: a LeRobot 0.6.1 SO-101 fine-tune, an openpi PyTorch checkpoint and an
openpi JAX checkpoint (openpi's own tiny parameters). What the test adds: `--model-config` for those sizes, a
loopback port for each server (`--openpi-port 0`), the live endpoint for `vlash run --server`, `--duration-s 2`,
and a fake `lerobot` package for the SO-101 arm. A renamed flag or a broken step fails here."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from robot_io.client import PolicyClient
from robot_io.protocol import Infer
from tests.checkpoints.layouts import Stats, write_lerobot, write_openpi_jax, write_openpi_pytorch
from tests.policies.builders import train_sentencepiece_tokenizer, train_wordlevel_tokenizer
from tests.policies.openpi_fixture import load_reference
from tests.serve_process import ServeProcess
from vlash.policies.pi05 import load_preset
from vlash.policies.pi05.weights import build_random

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent
FAKE_LEROBOT = ROOT / "tests" / "fixtures" / "fake_lerobot"
SECTION = "## Serve your own pi0.5"


def readme_commands() -> list[list[str]]:
    """The `vlash ...` lines of the section's first bash block, split as a shell would."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index(SECTION) :]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, f"no bash block under {SECTION!r}"
    return [shlex.split(line) for line in block.group(1).splitlines() if line.startswith("vlash ")]


def _value(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def _set(argv: list[str], flag: str, value: str) -> list[str]:
    argv = list(argv)
    argv[argv.index(flag) + 1] = value
    return argv


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """(folder holding every path the commands name, checkpoint path -> the --model-config of its size)."""
    root = tmp_path_factory.mktemp("readme")
    wordlevel = train_wordlevel_tokenizer(root / "paligemma") / "tokenizer.json"
    spm = train_sentencepiece_tokenizer(root / "spm") / "tokenizer.model"
    shutil.copyfile(spm, root / "paligemma_tokenizer.model")
    tiny = build_random(load_preset("pi05-tiny"), seed=4)
    lerobot = root / "my_so101_pi05" / "pretrained_model"
    write_lerobot(lerobot, tiny, "0.6.1", Stats.random(6, 6), wordlevel, ["top", "wrist"], relative=True)
    write_openpi_pytorch(root / "pi05_droid_pytorch", tiny, Stats.random(8, 7))
    ref = load_reference()
    write_openpi_jax(root / "pi05_droid", ref.params, Stats.random(8, 7), asset_id="droid")
    sizes = {k: v for k, v in ref.config.to_dict().items() if k in ("vision", "vlm", "expert", "vocab_size")}
    (root / "openpi-dummy.yaml").write_text(yaml.safe_dump({"name": "openpi-dummy", **sizes}))
    (root / "examples").symlink_to(ROOT / "examples")  # the shipped LeRobot checkpoint, as it stands
    (root / "configs" / "robots").mkdir(parents=True)
    shutil.copyfile(ROOT / "configs" / "robots" / "so101.yaml", root / "configs" / "robots" / "so101.yaml")
    sized = {"./my_so101_pi05/pretrained_model": "pi05-tiny", "./pi05_droid_pytorch": "pi05-tiny"}
    sized["./pi05_droid"] = str(root / "openpi-dummy.yaml")
    return root, sized


def _round_trip(endpoint: str) -> np.ndarray:
    with PolicyClient(endpoint, timeout_s=60.0) as client:
        meta = client.connect()
        images = {meta.cameras[0].name: np.zeros((96, 128, 3), np.uint8)}
        state = np.zeros(meta.state_dim, np.float32)
        actions = client.infer(Infer(1, 0, time.time_ns(), "pick up the red cube", images, state, seed=1)).actions
    assert actions.shape == (meta.chunk_length, meta.action_dim) and np.isfinite(actions).all()
    return actions


def _run_robot(argv: list[str], endpoint: str, cwd: Path) -> str:
    argv = [*_set(argv, "--server", endpoint), "--duration-s", "2"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FAKE_LEROBOT), str(ROOT)])}
    cmd = [sys.executable, "-m", "vlash.cli.main", *argv[1:]]
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, f"{shlex.join(argv)}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    return result.stdout


def test_the_readme_commands_serve_convert_and_drive_a_robot(stand_ins):
    root, sized = stand_ins
    commands = readme_commands()
    assert [c[1] for c in commands] == ["serve", "run", "serve", "run", "serve", "convert", "serve"], commands
    server: ServeProcess | None = None
    try:
        for argv in commands:
            command, args = argv[1], argv[2:]
            source = _value(args, "--checkpoint") or (args[2] if command == "convert" else None)
            if source in sized:
                args = [*args, "--model-config", sized[source]]
            if command == "convert":
                result = subprocess.run([sys.executable, "-m", "vlash.cli.main", "convert", *args], cwd=root,
                                        capture_output=True, text=True, timeout=300)  # fmt: skip
                assert result.returncode == 0, result.stderr[-2000:]
                assert (root / _value(args, "--out") / "config.yaml").is_file()
            elif command == "serve":
                if server is not None:
                    assert server.stop() == 0, server.err
                if "--openpi-port" in args:
                    args = _set(args, "--openpi-port", "0")
                server = ServeProcess(args, cwd=str(root))
                _round_trip(server.endpoint)
                if "--openpi-port" in args:
                    assert any("openpi clients on ws://127.0.0.1:" in line for line in server.out), server.out
            else:
                assert server is not None, "vlash run before any vlash serve"
                out = _run_robot(argv, server.endpoint, root)
                chunks = re.search(r"^\s*chunks run\s+(\d+)$", out, re.M)  # the summary's line
                assert chunks and int(chunks.group(1)) >= 1, out
    finally:
        if server is not None:
            assert server.stop() == 0, server.err
