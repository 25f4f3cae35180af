"""The simulated policy link of `vlash eval`: replies arrive after a modelled inference time, in control steps.

The executors under evaluation talk to vlash.sim.policy_link.SimulatedPolicyLink on a SimulatedClock, exactly as
they talk to a server. LinkTiming says when each message arrives: a whole chunk of the constant schedule d control steps
after its request; with the horizon-aware schedule, rows stream as they become final, row i at
d * (p + (1 - p) * (k_i + 1) / N) (p: the prefill's share of the inference time, k_i: the denoise step after which
row i is final), and the final message comes when the sampler stops, which is early when only the prefix and the
next s * q rows are needed (the server's early stop). Deterministic: times are a function of d and the chunk's
finality only.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from robot_io.protocol import Infer
from vlash.errors import ConfigError
from vlash.runtime.request import rows_needed
from vlash.sim.policy_link import PlannedChunk

PREFIX_ROW = -2  # final_at_step of a committed-prefix row (vlash.sampling.PREFIX)
NOT_FINAL_ROW = -1  # a row the sampler never finished (it stopped early)


@dataclass(frozen=True)
class PlanResult:
    """A chunk and when its rows became final: what a ChunkPolicy returns for one request."""

    actions: np.ndarray  # [H, J] in the robot's action units
    final_at_step: np.ndarray  # int [H]: denoise step after which each row was final (PREFIX_ROW, NOT_FINAL_ROW)
    steps_run: int  # denoise steps the sampler ran


@dataclass(frozen=True)
class LinkTiming:
    """When the simulated policy answers (module doc). Times in control steps after the request."""

    delay: int  # d: a constant-schedule chunk (all N steps) arrives d control steps after its request
    prefill_share: float = 0.15  # p: share of d spent in prefill (pi05-tiny on this CPU: 9.3 / 60 ms)
    num_steps: int = 10  # N: denoise steps of a whole chunk

    def __post_init__(self) -> None:
        if not (isinstance(self.delay, int) and self.delay >= 0):
            raise ConfigError(f"delay must be an int >= 0, got {self.delay!r}")
        if not 0.0 <= self.prefill_share < 1.0:
            raise ConfigError(f"prefill_share must be in [0, 1), got {self.prefill_share}")
        if not (isinstance(self.num_steps, int) and self.num_steps >= 1):
            raise ConfigError(f"num_steps must be an int >= 1, got {self.num_steps!r}")

    def fraction(self, steps_done: int) -> float:
        """Share of d after which `steps_done` denoise steps have run."""
        p = self.prefill_share
        return p + (1 - p) * steps_done / self.num_steps

    def planned(self, result: PlanResult) -> PlannedChunk:
        """The messages of one reply: a partial one per denoise step that finalised rows, then the final one."""
        final = np.asarray(result.final_at_step)
        done = final != NOT_FINAL_ROW
        rows = int(np.cumprod(done).sum())  # leading final rows: what the final message carries
        pieces = []
        for k in range(result.steps_run):
            stop = int(np.cumprod(done & (final <= k)).sum())
            if 0 < stop < rows and (not pieces or stop > pieces[-1][1]):
                pieces.append((self.fraction(k + 1), stop))
        return PlannedChunk(result.actions, tuple(pieces), rows, self.fraction(result.steps_run))


@lru_cache(maxsize=256)
def sampler_finality(schedule: str, num_steps: int, horizon: int, prefix_len: int, stop: int | None):
    """(final_at_step int [H], steps_run) of the flow sampler for these settings: run on a zero velocity, the
    finality of each row does not depend on the model."""
    import torch  # extra: server

    from vlash.sampling import FlowSampler, SamplerConfig  # extra: server

    sampler = FlowSampler(SamplerConfig(num_steps=num_steps, schedule=schedule, early_stop_final=stop))
    prefix = torch.zeros(1, prefix_len, 1) if prefix_len else None
    result = sampler.sample(lambda x, tau: torch.zeros_like(x), torch.zeros(1, horizon, 1), prefix=prefix)
    return result.final_at_step.numpy().copy(), result.steps_run


def oracle_result(actions: np.ndarray, infer: Infer, num_steps: int, default_schedule: str = "constant") -> PlanResult:
    """A PlanResult for a chunk planned without a sampler (the scripted expert): rows final when the sampler the
    request asked for would have finished them."""
    h = len(actions)
    c = 0 if infer.prefix is None else len(infer.prefix)
    schedule = infer.schedule or default_schedule
    stop = rows_needed(schedule, c, infer.execution_horizon, h)
    final, steps = sampler_finality(schedule, num_steps, h, c, stop if stop < h else None)
    return PlanResult(np.asarray(actions, np.float32), final, steps)
