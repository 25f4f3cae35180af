"""Idle OpenMP workers of a policy server sleep instead of spinning (OMP_WAIT_POLICY=PASSIVE) unless the user chose.

With every core in use and another process busy, spinning workers fight it for the cores: a pi05-small chunk (torch,
2 threads on 2 cores) went 3.5x slower beside one busy core, 1.6-1.8x with PASSIVE, and the quiet chunk did not slow
(docs/BENCHMARKS.md, "Steady on a shared machine"). libgomp reads the variable when it loads, so it must be set
before torch is imported: `vlash serve` sets it in its own process, a Ray fleet in its replicas' environment."""

from __future__ import annotations

import os

WAIT_POLICY = ("OMP_WAIT_POLICY", "PASSIVE")


def passive_thread_waits() -> None:
    """Set OMP_WAIT_POLICY=PASSIVE in this process unless the user set it (call before torch is imported)."""
    os.environ.setdefault(*WAIT_POLICY)


def server_wait_env() -> dict[str, str]:
    """The wait policy for a server process started elsewhere (a Ray replica): the user's if set, else PASSIVE."""
    name, default = WAIT_POLICY
    return {name: os.environ.get(name, default)}
