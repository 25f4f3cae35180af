"""`vlash serve` as a process: starts, answers, and exits 0 on SIGTERM; `vlash keys` writes key pairs."""

from __future__ import annotations

from robot_io.client import PolicyClient
from tests.serve_process import ServeProcess
from vlash.cli.main import main


def test_serve_answers_and_shuts_down_cleanly_on_sigterm(policy_dir):
    server = ServeProcess(["--checkpoint", str(policy_dir), "--steps", "2"])
    try:
        startup = next(line for line in server.out if "serving on" in line)
        assert "params" in startup and "warm-up" in startup, startup
        with PolicyClient(server.endpoint, timeout_s=10.0) as client:
            assert client.connect().num_steps == 2 and client.ping() > 0
    finally:
        code = server.stop()
    assert code == 0, server.err
    assert any("stopped" in line for line in server.out), server.out


def test_keys_writes_a_key_pair_and_refuses_to_overwrite(tmp_path, capsys):
    assert main(["keys", "--out", str(tmp_path), "--name", "server"]) == 0
    assert (tmp_path / "server.key").is_file() and (tmp_path / "server.key_secret").is_file()
    assert "server.key" in capsys.readouterr().out
    assert main(["keys", "--out", str(tmp_path), "--name", "server"]) == 2
    assert "--overwrite" in capsys.readouterr().err
