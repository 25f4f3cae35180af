"""`vlash demo`: a server child process, the simulated arm through real ZeroMQ, a table and a PNG."""

from __future__ import annotations

import pytest

from tests.server.conftest import write_policy
from vlash.cli.main import main
from vlash.demo.session import DemoConfig


def test_demo_compares_modes_side_by_side_and_writes_the_plot(tmp_path, capsys):
    policy = write_policy(tmp_path)
    png = tmp_path / "out" / "demo.png"
    # 2 s per mode: with 1 s, sync ran a single chunk once in a clean-clone run on a slow VM
    argv = ["demo", "--checkpoint", str(policy), "--duration", "2", "--modes", "sync,faster", "--steps", "4",
            "--inject-latency", "30", "--threads", "1", "--plot", str(png)]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "serving on tcp://127.0.0.1:" in out and "+30 ms" in out
    header = next(line for line in out.splitlines() if "metric" in line)
    assert header.index("sync") < header.index("faster")  # one table, a column per mode
    chunks = next(line for line in out.splitlines() if "chunks run" in line)
    assert all(int(n) >= 2 for n in chunks.strip("│┃| ").split("│")[1:]), chunks
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000


def test_missing_shipped_policy_is_a_clean_error_with_a_way_forward(capsys):
    assert main(["demo", "--policy", "no-such-policy"]) == 2
    err = capsys.readouterr().err
    assert "no shipped policy 'no-such-policy'" in err and "--random-weights" in err


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--modes", "sync,warp"], "warp"),
        (["--random-weights"], "needs --policy"),
        (["--duration", "0"], "duration"),
        (["--duration", "inf"], "DemoConfig.duration_s must be > 0, got inf"),
        (["--horizon", "0"], "execution_horizon must be an int >= 1, got 0"),
        (["--plot", "."], "--plot '.' is a directory; give a file name"),  # said before the demo runs, not after
    ],
)
def test_bad_arguments_name_the_problem(argv, match, capsys, tmp_path):
    assert main(["demo", "--checkpoint", str(tmp_path), *argv]) == 2
    assert match in capsys.readouterr().err


def test_the_demo_keeps_every_tick_and_chunk_of_its_runs_for_the_plot():
    config = DemoConfig(duration_s=20.0, rate_hz=30.0).run_config("faster")
    assert config.trace_ticks > 600 and config.executor.record_window > 600  # 600 ticks, at most one chunk each
