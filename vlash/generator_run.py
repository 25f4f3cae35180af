"""A generator that yields pieces and then returns a result, wrapped so callers can iterate the pieces and
read the result afterwards (the flow sampler's `SamplingRun`, the server runtime's `ChunkStream`)."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Generic, TypeVar

Piece = TypeVar("Piece")
Result = TypeVar("Result")


class GeneratorRun(Iterator[Piece], Generic[Piece, Result]):
    """Iterate for the pieces; once exhausted, `result` holds the generator's return value."""

    def __init__(self, steps: Generator[Piece, None, Result]) -> None:
        self._steps = steps
        self._result: Result | None = None
        self._finished = False

    def __iter__(self) -> GeneratorRun[Piece, Result]:
        return self

    def __next__(self) -> Piece:
        try:
            return next(self._steps)
        except StopIteration as stop:
            self._result, self._finished = stop.value, True
            raise

    @property
    def done(self) -> bool:
        """True once the generator has returned."""
        return self._finished

    @property
    def result(self) -> Result:
        """The generator's return value; RuntimeError while pieces remain (iterate or call `drain`)."""
        if not self._finished:
            raise RuntimeError(f"{type(self).__name__} not finished: iterate it to the end or call drain()")
        return self._result  # type: ignore[return-value]

    def drain(self) -> Result:
        """Run the remaining steps, discarding their pieces, and return the result."""
        for _ in self:
            pass
        return self.result

    def close(self) -> None:
        """Abandon the run (no further steps run)."""
        self._steps.close()
