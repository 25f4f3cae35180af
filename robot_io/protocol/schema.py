"""Per-message-type schemas: the body fields of each header and how each is checked on receipt.

A checker takes (field name, value, limits) and returns the value to store, or raises MessageError:
BAD_MESSAGE when the wire type is wrong (the sender does not speak the protocol), BAD_VALUE when the
type is right but the value is out of bounds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from robot_io.protocol.limits import Limits
from robot_io.protocol.messages import SCHEDULES, CameraSpec, ErrorCode, MessageError, MessageType

Checker = Callable[[str, Any, Limits], Any]
INT64_MAX = 2**63 - 1
MAX_MAP_ENTRIES = 256  # timing_ms and counters
MAX_KEY_CHARS = 64  # keys of timing_ms and counters


def bad_message(text: str) -> MessageError:
    return MessageError(ErrorCode.BAD_MESSAGE, text)


def bad_value(text: str) -> MessageError:
    return MessageError(ErrorCode.BAD_VALUE, text)


def _bound(bound: int | str, limits: Limits) -> int:
    return bound if type(bound) is int else getattr(limits, bound)


def integer(lo: int | str, hi: int | str) -> Checker:
    """An int in [lo, hi]; a bound given as a string names a Limits attribute."""

    def check(name: str, value: Any, limits: Limits) -> int:
        if type(value) is not int:  # excludes bool
            raise bad_message(f"{name}: expected int, got {type(value).__name__}")
        low, high = _bound(lo, limits), _bound(hi, limits)
        if not low <= value <= high:
            raise bad_value(f"{name}={value} out of range [{low}, {high}]")
        return value

    return check


def number(lo: float, hi: float) -> Checker:
    """A finite float (an int is accepted) in [lo, hi]."""

    def check(name: str, value: Any, limits: Limits) -> float:
        if type(value) not in (int, float):
            raise bad_message(f"{name}: expected float, got {type(value).__name__}")
        if not (math.isfinite(value) and lo <= value <= hi):
            raise bad_value(f"{name}={value} is not a finite number in [{lo}, {hi}]")
        return float(value)

    return check


def text(max_chars: int | str = "max_prompt_chars", choices: tuple[str, ...] | None = None) -> Checker:
    def check(name: str, value: Any, limits: Limits) -> str:
        if type(value) is not str:
            raise bad_message(f"{name}: expected str, got {type(value).__name__}")
        if len(value) > _bound(max_chars, limits):
            raise bad_value(f"{name}: {len(value)} chars exceed {_bound(max_chars, limits)}")
        if choices is not None and value not in choices:
            raise bad_value(f"{name}={value[:64]!r} is not one of {list(choices)}")
        return value

    return check


def flag(name: str, value: Any, limits: Limits) -> bool:
    if type(value) is not bool:
        raise bad_message(f"{name}: expected bool, got {type(value).__name__}")
    return value


def optional(inner: Checker) -> Checker:
    def check(name: str, value: Any, limits: Limits) -> Any:
        return None if value is None else inner(name, value, limits)

    return check


def error_code(name: str, value: Any, limits: Limits) -> ErrorCode:
    SHORT_TEXT(name, value, limits)
    try:
        return ErrorCode(value)
    except ValueError:
        raise bad_value(f"{name}={value!r} is not an ErrorCode") from None


def _map(name: str, value: Any, limits: Limits) -> dict:
    if type(value) is not dict:
        raise bad_message(f"{name}: expected map, got {type(value).__name__}")
    if len(value) > MAX_MAP_ENTRIES:
        raise bad_value(f"{name}: {len(value)} entries exceed {MAX_MAP_ENTRIES}")
    for key in value:
        MAP_KEY(f"{name} key", key, limits)
    return value


def float_map(name: str, value: Any, limits: Limits) -> dict[str, float]:
    return {k: FINITE(f"{name}[{k!r}]", v, limits) for k, v in _map(name, value, limits).items()}


def number_map(name: str, value: Any, limits: Limits) -> dict[str, int | float]:
    """Counters: ints stay ints (int64 range), floats must be finite."""
    out: dict[str, int | float] = {}
    for key, v in _map(name, value, limits).items():
        check = INT64 if type(v) is int else FINITE
        out[key] = check(f"{name}[{key!r}]", v, limits)
    return out


SHORT_TEXT = text(64)
MAP_KEY = text(MAX_KEY_CHARS)
FINITE = number(-math.inf, math.inf)
INT64 = integer(-INT64_MAX - 1, INT64_MAX)
CAMERA_FIELDS = {"name": text(256), "height": integer(1, "max_image_side"), "width": integer(1, "max_image_side")}


def cameras(name: str, value: Any, limits: Limits) -> list[CameraSpec]:
    if type(value) is not list:
        raise bad_message(f"{name}: expected list, got {type(value).__name__}")
    if len(value) > limits.max_images:
        raise bad_value(f"{name}: {len(value)} cameras exceed {limits.max_images}")
    specs = [CameraSpec(**check_fields(f"{name}[{i}]", item, CAMERA_FIELDS, limits)) for i, item in enumerate(value)]
    if len({c.name for c in specs}) != len(specs):
        raise bad_value(f"{name}: duplicate camera names")
    return specs


def check_fields(where: str, value: Any, schema: dict[str, Checker], limits: Limits) -> dict[str, Any]:
    """Check a map has exactly the schema's keys and every value passes its checker."""
    if type(value) is not dict:
        raise bad_message(f"{where}: expected map, got {type(value).__name__}")
    if value.keys() != schema.keys():
        got = sorted(str(k) for k in value)[:32]
        raise bad_message(f"{where}: expected keys {sorted(schema)}, got {got}")
    return {key: check(f"{where}.{key}", value[key], limits) for key, check in schema.items()}


UINT = integer(0, INT64_MAX)
BODY_SCHEMAS: dict[MessageType, dict[str, Checker]] = {
    MessageType.HELLO: {"client": text(256), "version": integer(0, 2**31 - 1)},
    MessageType.METADATA: {
        "model_id": text(),
        "cameras": cameras,
        "state_dim": integer(1, "max_state_dim"),
        "action_dim": integer(1, "max_action_dim"),
        "chunk_length": integer(1, "max_chunk_length"),
        "control_rate_hz": number(1e-3, 1e5),
        "precision": text(64),
        "engine": text(64),
        "num_steps": integer(1, "max_chunk_length"),
        "schedule": text(64, SCHEDULES),
        "relative_actions": flag,
        "version": integer(0, 2**31 - 1),
    },
    MessageType.INFER: {
        "request_id": UINT,
        "step_index": UINT,
        "capture_time_ns": UINT,
        "prompt": text(),
        "delay_steps": integer(0, "max_chunk_length"),
        "schedule": optional(text(64, SCHEDULES)),
        "execution_horizon": optional(integer(0, "max_chunk_length")),
        "seed": optional(UINT),
    },
    MessageType.ACTIONS: {
        "request_id": UINT,
        "start": integer(0, "max_chunk_length"),
        "final": flag,
        "chunk_length": integer(1, "max_chunk_length"),
        "step_index": UINT,
        "timing_ms": float_map,
    },
    MessageType.ERROR: {"code": error_code, "message": text(), "request_id": optional(UINT)},
    MessageType.PING: {"sent_ns": UINT, "server_ns": optional(UINT)},
    MessageType.RESET: {},
    MessageType.STATS: {"counters": number_map},
}
