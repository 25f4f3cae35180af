"""The denoise loop: every step of a plan's rows, one row or a batch alike, whoever evaluates the velocity.

`FlowSampler` (rows that share their settings) and the runtime's batched requests both run it. Each pass it drops
the rows `cancelled` names (reported at once, before any more work is spent on them), then runs the next step, or
the next span of steps when the engine takes spans (`Engine.span_granularity`: "step", or "chunk" up to the next
step that streams something), and yields what changed: one `StepReport` per step.

    for report in denoise(stepper, velocity, spans=engine.spans(cache), cancelled=lambda row: gone[row]):
        report.finals, report.done, report.dropped
"""

from __future__ import annotations

from collections.abc import Callable, Generator

from vlash.sampling.batch import BatchStepper, SpanFn, StepReport
from vlash.sampling.velocity import VelocityFn

Pace = Callable[[int], None]  # pace(steps): called before each pass with the steps it runs (emulated device time)


def never(row: int) -> bool:
    return False


def denoise(
    stepper: BatchStepper,
    velocity: VelocityFn,
    spans: tuple[SpanFn, str] | None = None,
    cancelled: Callable[[int], bool] = never,
    pace: Pace | None = None,
) -> Generator[StepReport, None, None]:
    """Run `stepper` to its end (see the module docstring). velocity(x, tau) is evaluated on the rows of
    `stepper.x_rows`; spans: (run_span, granularity) of an engine that takes spans; a guided row (RTC needs autograd
    at every step) runs step by step whatever the engine. pace(steps) runs before each pass and counts in its steps'
    time."""
    while not stepper.done:
        gone = [row for row in stepper.active if cancelled(row)]
        if gone:
            stepper.drop(gone)
            yield StepReport(stepper.step_index, [], [], gone)
            continue
        use_spans = spans is not None and not stepper.guided
        steps = stepper.steps_to_next_report() if use_spans and spans[1] == "chunk" else 1
        started = stepper.clock()
        if pace is not None:
            pace(steps)
        if use_spans:
            yield from stepper.step_span(spans[0], steps, started)
        else:
            yield stepper.step(velocity, started)
