"""Fixed-rate control loop and the clocks it runs on (real monotonic time, or simulated for tests)."""

from robot_io.control.clock import Clock, MonotonicClock, SimulatedClock
from robot_io.control.loop import ControlLoop, LoopSummary, Tick
from robot_io.control.window import RecentWindow

__all__ = ["Clock", "ControlLoop", "LoopSummary", "MonotonicClock", "RecentWindow", "SimulatedClock", "Tick"]
