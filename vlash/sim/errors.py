"""Typed errors of the simulation suite."""

from robot_io.protocol.errors import RobotIOError, ShapeError


class SimError(RobotIOError):
    """Base class of the simulation's errors."""


class SimConfigError(SimError, ValueError):
    """A simulation or task configuration value is invalid."""


class SimActionError(ShapeError):
    """An action has the wrong shape or is not finite (a ShapeError, hence a ValueError)."""


class SimStateError(SimError, RuntimeError):
    """The env was used out of order: step before reset, step after the episode ended, foreign snapshot."""
