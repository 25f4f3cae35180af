"""`vlash serve` as a process: starts, answers, and exits 0 on SIGTERM; `vlash keys` writes key pairs."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading

from robot_io.client import PolicyClient
from vlash.cli.main import main

STARTUP_S = 60.0  # torch import + policy load on a busy CPU
EXIT_S = 15.0


def _wait_for_endpoint(proc: subprocess.Popen) -> str:
    lines: list[str] = []
    found = threading.Event()

    def read() -> None:
        for line in proc.stdout:
            lines.append(line)
            if "serving on" in line:
                found.set()
                return

    threading.Thread(target=read, daemon=True).start()
    assert found.wait(STARTUP_S), (
        f"no startup line; output: {lines}; stderr: {proc.stderr.read() if proc.poll() else ''}"
    )
    match = re.search(r"serving on (\S+)", lines[-1])
    assert match and "params" in lines[-1] and "warm-up" in lines[-1], lines[-1]
    return match.group(1)


def test_serve_answers_and_shuts_down_cleanly_on_sigterm(policy_dir):
    cmd = [sys.executable, "-m", "vlash.cli.main", "serve", "--checkpoint", str(policy_dir), "--device", "cpu"]
    cmd += ["--bind", "tcp://127.0.0.1:0", "--threads", "1", "--no-warmup", "--stats-every", "0", "--steps", "2"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        endpoint = _wait_for_endpoint(proc)
        with PolicyClient(endpoint, timeout_s=10.0) as client:
            assert client.connect().num_steps == 2 and client.ping() > 0
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=EXIT_S)
        assert proc.returncode == 0, err
        assert "stopped" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=EXIT_S)


def test_keys_writes_a_key_pair_and_refuses_to_overwrite(tmp_path, capsys):
    assert main(["keys", "--out", str(tmp_path), "--name", "server"]) == 0
    assert (tmp_path / "server.key").is_file() and (tmp_path / "server.key_secret").is_file()
    assert "server.key" in capsys.readouterr().out
    assert main(["keys", "--out", str(tmp_path), "--name", "server"]) == 2
    assert "--force" in capsys.readouterr().err
