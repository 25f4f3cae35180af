"""`vlash serve` in a child process: started, waited for (bounded) until it prints its endpoint, stopped.

A separate process keeps the model's CPU work and its Python (GIL) time away from the control loop, as on a
real robot where the server runs on another computer."""

from __future__ import annotations

import logging
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

from vlash.errors import ConfigError

log = logging.getLogger(__name__)
SERVING = re.compile(r"serving on (\S+)")


class ServerProcess:
    """`python -m vlash.cli.main serve ARGS --bind tcp://127.0.0.1:0`; `start()` returns the bound endpoint."""

    def __init__(self, serve_args: Sequence[str], start_timeout_s: float = 180.0) -> None:
        self.args = [sys.executable, "-m", "vlash.cli.main", "serve", *serve_args, "--stats-every", "0"]
        if "--bind" not in serve_args:
            self.args += ["--bind", "tcp://127.0.0.1:0"]
        self.start_timeout_s = start_timeout_s
        self.process: subprocess.Popen | None = None
        self.banner = ""  # the server's start line (model, threads, load and warm-up times)

    def start(self) -> str:
        """Spawn the server and wait (at most start_timeout_s) for its "serving on ENDPOINT" line."""
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.process = subprocess.Popen(self.args, stdout=subprocess.PIPE, text=True, env=env)
        deadline = time.monotonic() + self.start_timeout_s
        with selectors.DefaultSelector() as sel:
            sel.register(self.process.stdout, selectors.EVENT_READ)
            while (remaining := deadline - time.monotonic()) > 0:
                if not sel.select(remaining):
                    break
                line = self.process.stdout.readline()
                if not line:  # exited (its error went to stderr)
                    code = self.process.wait(timeout=5.0)
                    raise ConfigError(f"the policy server exited with code {code} before serving")
                if match := SERVING.search(line):
                    self.banner = line.strip()
                    return match.group(1)
        self.stop()
        raise ConfigError(f"the policy server did not start within {self.start_timeout_s:.0f} s")

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM (clean shutdown), then SIGKILL if it does not exit within timeout_s."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            log.warning("policy server did not stop within %.0f s: killing it", timeout_s)
            proc.kill()
            proc.communicate(timeout=timeout_s)

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
