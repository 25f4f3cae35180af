"""Every command of the README's "Commands" block runs, as written, in an empty folder (where it writes its
outputs), with test-sized budgets appended: fewer episodes, steps, iterations and seconds (`SHORTER`), the live
endpoint for `vlash run --server`, and a loopback port for `vlash serve`. GPU lines run only where CUDA is.
A renamed flag, a broken default or a command that stopped working fails here."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.serve_process import ServeProcess

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent
SECTION = "## Commands"
# flags appended per command (argparse keeps the last value): the README's budgets, cut to test size
SHORTER = {
    "bench": ["--iters", "1", "--warmup", "0"],
    "eval": ["--episodes", "2", "--workers", "1"],
    "train": ["--steps", "2", "--episodes-per-task", "2", "--batch-size", "4"],
    "run": ["--duration-s", "2"],
    "demo": ["--duration-s", "2"],
    "quantize": ["--rollout-episodes", "1"],
}


def readme_commands() -> list[list[str]]:
    """The section's `vlash ...` lines (with `\\` continuations joined, `# comments` and `[optional]` parts
    dropped), split as a shell would; a `cmd && cmd` line gives both."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text[text.index(SECTION) :], re.S)
    assert block, f"no bash block under {SECTION!r}"
    joined = block.group(1).replace("\\\n", " ")
    commands = []
    for line in joined.splitlines():
        line = re.sub(r"\s#.*$", "", line).strip()
        if not line.startswith("vlash "):
            continue
        for part in line.split("&&"):
            commands.append(shlex.split(re.sub(r"\[[^\]]*\]", "", part)))
    return commands


def _needs_gpu(argv: list[str]) -> bool:
    return "--device" in argv and argv[argv.index("--device") + 1].startswith("cuda")


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _vlash(argv: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "vlash.cli.main", *argv[1:], *SHORTER.get(argv[1], [])]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


# The commands run in two lanes at once (each lane in README order), so the suite uses both of CI's cores. The
# second lane's commands depend on nothing the first writes: the served policy and `vlash run` against it, the demo,
# keys, eval and train; the first keeps export -> quantize -> bench --artifact in order.
SECOND_LANE = {"serve", "run", "demo", "keys", "eval", "train"}


def _run_lane(commands: list[list[str]], cwd: Path) -> list[str]:
    """Run one lane's commands in order (a `vlash serve` line stays up for the lane's `vlash run`); the names run."""
    server: ServeProcess | None = None
    ran = []
    try:
        for argv in commands:
            if _needs_gpu(argv) and not _has_cuda():
                continue
            if argv[1] == "serve":
                args = argv[2:]
                if "--bind" in args:
                    args[args.index("--bind") + 1] = "tcp://127.0.0.1:0"
                server = ServeProcess(args, cwd=str(cwd))
                ran.append("serve")
                continue
            if argv[1] == "run":
                assert server is not None, "vlash run before vlash serve"
                argv = [*argv]
                argv[argv.index("--server") + 1] = server.endpoint
            result = _vlash(argv, cwd)
            assert result.returncode == 0, f"{shlex.join(argv)}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
            ran.append(argv[1])
    finally:
        if server is not None:
            assert server.stop() == 0, "".join(server.err[-30:])
    return ran


def test_every_readme_command_runs(tmp_path):
    commands = readme_commands()
    assert {c[1] for c in commands} >= {"info", "bench", "eval", "train", "serve", "run", "demo", "keys", "export",
                                         "quantize"}, commands  # fmt: skip
    lanes = [[c for c in commands if c[1] not in SECOND_LANE], [c for c in commands if c[1] in SECOND_LANE]]
    with ThreadPoolExecutor(2) as pool:
        ran = [name for lane in pool.map(lambda lane: _run_lane(lane, tmp_path), lanes) for name in lane]
    for written in ("out.json", "out.png", "demo.png", "keys/server.key", "checkpoints/reach/config.yaml",
                    "artifacts/tiny-ort/manifest.json", "artifacts/tiny-int8"):  # fmt: skip
        assert (tmp_path / written).exists(), written
    assert "run" in ran and "demo" in ran
