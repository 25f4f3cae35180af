"""`vlash serve` as a subprocess for tests: start it on a free loopback port, read the endpoint from its startup
line, stop it with SIGTERM (the way a supervisor does) and check it exited cleanly. Both output streams are
drained by threads, so a chatty server never blocks on a full pipe."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

STARTUP_S = 120.0  # torch import + policy load + warm-up on a busy 2-core CPU
EXIT_S = 15.0
QUIET = ["--device", "cpu", "--threads", "1", "--no-warmup", "--stats-every", "0"]


class ServeProcess:
    """A running `vlash serve ARGS` (by `python`, in `cwd`); `endpoint` once it serves, `out` / `err`: its output."""

    def __init__(
        self, args: list[str], bind: str = "tcp://127.0.0.1:0", python: str = sys.executable, cwd: str | None = None
    ) -> None:
        cmd = [python, "-m", "vlash.cli.main", "serve", "--bind", bind, *QUIET, *args]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
        self.out: list[str] = []
        self.err: list[str] = []
        self._serving = threading.Event()
        self._readers = [
            threading.Thread(target=self._drain, args=(self.proc.stdout, self.out), daemon=True),
            threading.Thread(target=self._drain, args=(self.proc.stderr, self.err), daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        if not self._serving.wait(STARTUP_S):
            self.stop()
            raise AssertionError(f"vlash serve {' '.join(args)} never served; out: {self.out}; err: {self.err[-30:]}")
        match = re.search(r"serving on (\S+)", next(line for line in self.out if "serving on" in line))
        assert match, self.out
        self.endpoint = match.group(1)

    def _drain(self, stream, lines: list[str]) -> None:
        for line in stream:
            lines.append(line)
            if "serving on" in line:
                self._serving.set()

    def stop(self) -> int:
        """SIGTERM and wait (kill if it does not exit in time); returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(EXIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(EXIT_S)
        for reader in self._readers:
            reader.join(EXIT_S)
        return self.proc.returncode


@contextmanager
def served(args: list[str]) -> Iterator[str]:
    """The endpoint of a `vlash serve ARGS` running for the duration of the block; it must exit 0 on SIGTERM."""
    server = ServeProcess(args)
    try:
        yield server.endpoint
    finally:
        code = server.stop()
    assert code == 0, "".join(server.err[-30:])
