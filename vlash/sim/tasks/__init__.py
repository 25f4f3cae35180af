"""The tasks of the suite, one module each; `TASK_TYPES` maps a task name to its class."""

from vlash.sim.tasks.base import Task
from vlash.sim.tasks.hold import HoldConfig, HoldTask
from vlash.sim.tasks.intercept import InterceptConfig, InterceptTask
from vlash.sim.tasks.reach import ReachConfig, ReachTask
from vlash.sim.tasks.track import TrackConfig, TrackTask
from vlash.sim.tasks.whack import WhackConfig, WhackTask

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
