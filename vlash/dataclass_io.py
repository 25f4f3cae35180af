"""Build a dataclass from an untrusted mapping (a JSON manifest, a YAML profile) with one clear error.

Unknown keys, missing required fields and constructor type errors all become `error(...)` naming the
source, so every file format vlash reads fails the same way.
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any, TypeVar

T = TypeVar("T")


def dataclass_from_mapping(cls: type[T], doc: Any, source: str, what: str, error: type[Exception]) -> T:
    """`cls(**doc)` after checking that doc is a mapping with only known keys and every required field."""
    if not isinstance(doc, dict):
        raise error(f"{source}: {what} must be a mapping, got {type(doc).__name__}")
    known = {f.name for f in fields(cls)}
    unknown = sorted(str(k) for k in set(doc) - known)
    if unknown:
        raise error(f"{source}: unknown {what} keys {unknown}; known: {sorted(known)}")
    required = {f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING}
    missing = sorted(required - set(doc))
    if missing:
        raise error(f"{source}: {what} is missing {missing}")
    try:
        return cls(**doc)
    except TypeError as exc:
        raise error(f"{source}: {exc}") from exc
