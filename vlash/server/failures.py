"""What a robot is told when its request fails, the same from the policy server (vlash.server.worker) and the fleet
(vlash.fleet.batch): the error code and text of an exception, and the check that a chunk may be sent at all."""

from __future__ import annotations

import numpy as np

from robot_io.protocol import ErrorCode

MAX_ERROR_CHARS = 1000  # error texts are cut to this (the protocol refuses text over Limits.max_prompt_chars)


class BadOutput(Exception):
    """The model's output cannot be sent: not finite (the model diverged), or refused by the protocol."""


def check_finite(actions: np.ndarray) -> None:
    """BadOutput unless every action is finite: a diverged model's NaN or inf never reaches a robot."""
    if not np.isfinite(actions).all():
        raise BadOutput("the model returned NaN or inf actions (it diverged); no chunk was sent")


def request_error(exc: BaseException) -> tuple[ErrorCode, str]:
    """The error code and text for a request that failed with `exc`, cut to MAX_ERROR_CHARS: BAD_VALUE and its
    message when the request does not fit the policy (a ValueError, ShapeError included); otherwise INTERNAL (the
    server's fault: the caller logs it) with a BadOutput's message, or the exception's type and message."""
    if isinstance(exc, ValueError):
        return ErrorCode.BAD_VALUE, str(exc)[:MAX_ERROR_CHARS]
    text = str(exc) if isinstance(exc, BadOutput) else f"{type(exc).__name__}: {exc}"
    return ErrorCode.INTERNAL, text[:MAX_ERROR_CHARS]
