"""A deterministic simulation of the server's JobQueue under several clients, on a simulated clock.

The model thread is simulated the way InferenceWorker runs a job: one stage per time unit, the cancel checked
before every stage (the runtime hook), a job served after `stages` stages. Clients are either closed-loop (a new
request as soon as the previous one got its last reply, like a robot waiting for its chunk) or open-loop at a
fixed period (a client that sends faster than one inference). Within one time unit, the requests due are
submitted before the model takes its next step. The same JobQueue class as the server's runs the queue.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from robot_io.protocol import Infer
from vlash.server.jobs import Job, JobQueue


@dataclass
class SimClient:
    name: str
    period: int | None = None  # None: closed loop; else a new request every `period` units, whatever happened
    phase: int = 0  # time unit of the first request of an open-loop client
    think: int = 0  # closed loop: time units between a request's last reply and the next request


@dataclass
class SimResult:
    served: Counter  # client name -> chunks it received
    dropped: Counter  # client name -> requests superseded
    wasted_units: int  # model time spent on requests that were then cancelled
    duration: int

    def throughput(self, names: list[str]) -> float:
        """Chunks per 1000 time units received by the clients `names` together."""
        return 1000 * sum(self.served[n] for n in names) / self.duration


def simulate(queue: JobQueue, clients: list[SimClient], stages: int, duration: int) -> SimResult:
    result = SimResult(Counter(), Counter(), 0, duration)
    ready_at = {c.name: 0 for c in clients if c.period is None}  # closed loop: when the next request goes out
    think = {c.name: c.think for c in clients}
    next_id = iter(range(1, 10**9))
    running: Job | None = None
    done_stages = now = 0

    def submit(name: str) -> None:
        infer = Infer(next(next_id), 0, 0, "", {}, np.zeros(1, np.float32))
        for old in queue.submit(Job(name.encode(), infer)):  # replaced while pending: DROPPED
            finish(old, "dropped")

    def finish(job: Job, outcome: str) -> None:
        (result.served if outcome == "served" else result.dropped)[job.client.decode()] += 1
        name = job.client.decode()
        if name in ready_at:
            ready_at[name] = now + 1 + think[name]

    for now in range(duration):
        for client in clients:
            if client.period is None and ready_at[client.name] == now:
                ready_at[client.name] = -1  # waiting for its reply
                submit(client.name)
            elif client.period is not None and now >= client.phase and (now - client.phase) % client.period == 0:
                submit(client.name)
        while running is None or running.cancelled.is_set():  # a cancel is seen before the next stage
            if running is not None:
                result.wasted_units += done_stages
                queue.done(running)
                finish(running, "dropped")
            running, done_stages = queue.take(timeout_s=0.0), 0
            if running is None:
                break
        if running is None:
            continue
        done_stages += 1
        if done_stages == stages:
            queue.done(running)
            finish(running, "served")
            running = None
    return result


def fast_client_scenario(queue: JobQueue, fast: bool, think: int = 25, duration: int = 20_000) -> SimResult:
    """Two robots "a" and "b" in closed loop (the next request `think` units after a chunk; an inference takes
    10 units), and a third client: "fast" (a request every 3 units) or, for the baseline, a robot like the others."""
    third = SimClient("fast", period=3) if fast else SimClient("fast", think=think)
    return simulate(queue, [SimClient("a", think=think), SimClient("b", think=think), third], 10, duration)
