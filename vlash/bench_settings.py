"""What `vlash bench` times (`BenchSettings`): no torch here, so that its flags are generated from these fields and
checked before the model code is imported (vlash.bench runs them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from vlash.errors import ConfigError
from vlash.sampling import Schedule

SCHEDULES = tuple(s.value for s in Schedule)


@dataclass(frozen=True)
class BenchSettings:
    """One benchmark's runs."""

    schedule: str = field(default="constant", metadata={"choices": SCHEDULES})  # the flow schedule timed
    steps: int = 10  # Euler steps per chunk
    iters: int = 20  # timed runs
    warmup: int = 3  # untimed runs before timing
    batch: int = 1  # observations per call

    def __post_init__(self) -> None:
        if self.schedule not in SCHEDULES:
            raise ConfigError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        for name, low in (("steps", 1), ("iters", 1), ("batch", 1), ("warmup", 0)):
            value = getattr(self, name)
            if type(value) is not int or value < low:
                raise ConfigError(f"{name} must be an int >= {low}, got {value!r}")
