"""Robot-side package of vlash: light by design (numpy + pyzmq + msgspec only, never torch).

It runs on the robot computer. The wire protocol, the ZeroMQ client, the control loop, the
chunk executors, safety and robots live here; the server imports the protocol from here so both
ends share one definition.
"""

from robot_io.protocol.errors import DeadlineExceeded, ProtocolError, RobotIOError, ShapeError
from robot_io.specs import ArraySpec

__all__ = ["ArraySpec", "DeadlineExceeded", "ProtocolError", "RobotIOError", "ShapeError"]
