"""Typed errors shared by the robot side and the server (the server imports them from here)."""


class RobotIOError(Exception):
    """Base class of every error raised by robot_io."""


class ShapeError(RobotIOError, ValueError):
    """An array has the wrong shape, dtype or size for the spec it must satisfy."""


class ProtocolError(RobotIOError):
    """A message on the wire is malformed, of an unknown version or type, or out of bounds."""


class DeadlineExceeded(RobotIOError, TimeoutError):
    """A bounded wait ran out (server reply, control deadline)."""


class EndpointError(RobotIOError, ValueError):
    """A server endpoint is not one a ZeroMQ client can connect to; the message suggests a correct one."""
