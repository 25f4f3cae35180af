"""The tasks of the suite, one module each; `TASK_TYPES` maps a task name to its class."""

from robot_io.sim.tasks.base import Task
from robot_io.sim.tasks.hold import HoldConfig, HoldTask
from robot_io.sim.tasks.intercept import InterceptConfig, InterceptTask
from robot_io.sim.tasks.reach import ReachConfig, ReachTask
from robot_io.sim.tasks.track import TrackConfig, TrackTask
from robot_io.sim.tasks.whack import WhackConfig, WhackTask

TASK_TYPES: dict[str, type[Task]] = {
    "reach": ReachTask,
    "track": TrackTask,
    "whack": WhackTask,
    "intercept": InterceptTask,
    "hold": HoldTask,
}

__all__ = [
    "TASK_TYPES",
    "HoldConfig",
    "HoldTask",
    "InterceptConfig",
    "InterceptTask",
    "ReachConfig",
    "ReachTask",
    "Task",
    "TrackConfig",
    "TrackTask",
    "WhackConfig",
    "WhackTask",
]
