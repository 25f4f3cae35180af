"""`vlash demo` prints the host's load beside its latencies: the 1-min load average, the cores and the server's
torch threads (robot_io.host_load), and a warning line only when the load exceeds the cores left free."""

from __future__ import annotations

import re

from tests.server.conftest import write_policy
from vlash.cli.main import main


def test_the_demo_summary_has_the_host_load_and_the_server_threads_beside_its_latencies(tmp_path, capsys):
    argv = ["demo", "--checkpoint", str(write_policy(tmp_path)), "--duration-s", "2", "--modes", "vlash", "--steps",
            "4", "--threads", "1", "--plot", str(tmp_path / "demo.png")]  # fmt: skip
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = next(i for i, line in enumerate(lines) if 'every row is defined in docs/METHODS.md, "Run summary"' in line)
    host = re.fullmatch(
        r"host load (\d+\.\d\d) \(1-min average\) on (\d+) cores; server torch threads: 1", lines[rows + 1]
    )
    assert host, lines[rows:]
    inflated = float(host.group(1)) > int(host.group(2)) - 1
    assert lines[rows + 2].startswith("warning: the host's load average") == inflated, lines[rows:]
