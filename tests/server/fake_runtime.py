"""A model-free stand-in for PolicyRuntime inside PolicyServer, driven by the test with events, not wall clock.

`stream` runs a batch of requests as PolicyRuntime.stream does, in STAGES stages: before each stage it calls the
server's `pace` once and reads `cancelled(row)` for each running row (a cancelled row leaves with Cancelled, at
once), then waits until the test lets every running row go on (`release(request_id)`); while it waits it reads
`cancelled` again every few milliseconds, so a cancel still ends a row. `started` records the request ids in the
order the model thread took them; `wait_started(n)` blocks (bounded) until n requests have started.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Generator
from types import SimpleNamespace

import numpy as np

from robot_io.client import PolicyClient
from robot_io.protocol import Actions, CameraSpec, Error, Infer, Metadata
from vlash.runtime.request import Cancelled, RowEvent
from vlash.server.config import ServerConfig
from vlash.server.server import PolicyServer

H, J = 4, 2
STAGES = 3
WAIT_S = 10.0  # longest any wait of these helpers lasts; a test fails rather than hangs
METADATA = Metadata("fake", [CameraSpec("front", 8, 8)], J, J, H, 50.0, "fp32", "fake", STAGES - 1, "constant", False)


def fake_events(runtime: FakeRuntime, ids: list[int], cancelled, pace) -> Generator[RowEvent, None, None]:
    """The batch of requests `ids` (see the module docstring): no partial actions, each row's done event."""
    gates = [runtime.gate(request_id) for request_id in ids]
    for request_id in ids:
        runtime.note_started(request_id)
    for request_id in ids:
        if request_id in runtime.raises:
            raise runtime.raises[request_id]
    running = list(range(len(ids)))

    def drop_cancelled() -> Generator[RowEvent, None, None]:
        for row in [row for row in running if cancelled(row)]:
            running.remove(row)
            yield RowEvent(row, result=Cancelled("cancelled"))

    for stage in range(STAGES):
        if pace is not None:
            pace(0 if stage == 0 else 1)
        yield from drop_cancelled()
        while waiting := [gates[row] for row in running if not gates[row].is_set()]:
            waiting[0].wait(0.005)  # released by the test; meanwhile a cancel drops the row
            yield from drop_cancelled()
    for row in running:
        yield RowEvent(row, result=runtime.result(ids[row]))


class FakeRuntime:
    """`release(rid)` lets request `rid` run to its end (or `auto_release` lets every request through);
    `outputs[rid]` overrides the value its chunk is filled with (e.g. NaN for a diverged model); `raises[rid]` is
    raised by the model as request `rid` starts."""

    horizon, num_steps = H, STAGES - 1
    max_batch = None  # any batch size

    def __init__(self, auto_release: bool = False) -> None:
        self.auto_release = auto_release
        self.outputs: dict[int, float] = {}
        self.raises: dict[int, BaseException] = {}
        self.started: list[int] = []
        self._gates: dict[int, threading.Event] = {}
        self._cond = threading.Condition()

    def stream(self, requests, cancelled=lambda row: False, pace=None) -> Generator[RowEvent, None, None]:
        ids = [int(r.seed) for r in requests]  # the request id travels as the seed (see fake_infer())
        return fake_events(self, ids, cancelled, pace)

    def result(self, request_id: int) -> SimpleNamespace:
        """The finished request: a chunk filled with `output_value(request_id)`."""
        actions = np.full((H, J), self.output_value(request_id), np.float32)
        timing = {"first_action_ms": 0.0, "total_ms": 0.0}
        return SimpleNamespace(actions=actions, timing_ms=timing, step_ms=[], final_rows=H)

    def rows_needed(self, request) -> int:
        return H  # the whole chunk, as PolicyRuntime for every request without the horizon-aware early stop

    def gate(self, request_id: int) -> threading.Event:
        with self._cond:
            gate = self._gates.setdefault(request_id, threading.Event())
            if self.auto_release:
                gate.set()
            return gate

    def release(self, request_id: int) -> None:
        self.gate(request_id).set()

    def note_started(self, request_id: int) -> None:
        with self._cond:
            self.started.append(request_id)
            self._cond.notify_all()

    def wait_started(self, count: int) -> list[int]:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.started) >= count, WAIT_S), f"started: {self.started}"
            return list(self.started)

    def output_value(self, request_id: int) -> float:
        return self.outputs.get(request_id, float(request_id))


def fake_infer(request_id: int) -> Infer:
    """A request the fake policy accepts; its id doubles as the seed (how fake_events knows which request it runs)."""
    images = {"front": np.zeros((8, 8, 3), np.uint8)}
    return Infer(request_id, request_id, time.time_ns(), "p", images, np.zeros(J, np.float32), seed=request_id)


def start_fake_server(runtime: FakeRuntime, on_failure=None, **config) -> PolicyServer:
    server = PolicyServer(runtime, METADATA, ServerConfig(bind="tcp://127.0.0.1:0", **config), on_failure=on_failure)
    server.start()
    return server


def last_reply(client: PolicyClient, request_id: int) -> Actions | Error:
    """The final ACTIONS or the ERROR of `request_id` (other requests' replies are skipped); bounded wait."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        message = client.poll(0.2)
        if message is not None and message.request_id == request_id and (isinstance(message, Error) or message.final):
            return message
    raise AssertionError(f"no last reply to request {request_id} within {WAIT_S} s")
