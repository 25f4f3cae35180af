"""Typed errors of the server side. Robot-side errors live in robot_io.protocol.errors and are re-exported here."""

from robot_io.protocol.errors import DeadlineExceeded, ProtocolError, ShapeError


class VlashError(Exception):
    """Base class of vlash's own errors."""


class ConfigError(VlashError, ValueError):
    """A configuration value is invalid; the message names the field and the value."""


class CheckpointError(VlashError):
    """A checkpoint cannot be loaded: missing/unexpected keys, shape mismatches, unreadable files."""


class ServerError(VlashError, RuntimeError):
    """The policy server cannot start serving (e.g. its warm-up request failed on the model)."""


class EngineUnavailable(VlashError, RuntimeError):
    """An inference backend cannot run here (missing extra, no device); the message says how to fix it."""


__all__ = [
    "CheckpointError",
    "ConfigError",
    "DeadlineExceeded",
    "EngineUnavailable",
    "ProtocolError",
    "ServerError",
    "ShapeError",
    "VlashError",
]
