"""SimSettings: one object that configures the simulator, read from a YAML file plus KEY=VALUE overrides.

    settings = load_sim_settings("configs/eval/velocity-load.yaml", ["disturbance.scale=0.15", "task.hold_steps=45"])
    env = make_env("hold", seed=0, settings=settings)

The file holds the same keys as `SimSettings.to_dict()` (every key optional, defaults as today's simulator):

    action_interface: velocity        # position | velocity | ee_delta
    disturbance: {kind: load, scale: 0.3, period_range: [1.5, 4.0], num_sines: 3}
    sensor_noise: 0.0                 # std of the observed state's noise (state units)
    observation_latency: 0            # observations returned this many control steps late
    observe: [joint_velocity, target] # extras appended to the observed state (vlash.sim.observations); [] default
    image_size: 96
    arm: {max_velocity: 3.0, ...}     # ArmConfig fields
    planner: {gain: 10.0, ...}        # PlannerConfig fields
    task: {hold_steps: 45}            # fields of the task's *Config, checked when an env is built for a task

Overrides use dotted keys ("arm.link_lengths=[0.45,0.4]") with values parsed as YAML. Unknown keys, wrong
types and out-of-range values raise SimConfigError naming the key.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from vlash.sim.config import ArmConfig, PlannerConfig
from vlash.sim.disturbance import DisturbanceConfig
from vlash.sim.errors import SimConfigError
from vlash.sim.interfaces import INTERFACES
from vlash.sim.observations import check_observe
from vlash.sim.settings_values import apply_fields, coerce, plain

SECTIONS: dict[str, type] = {"arm": ArmConfig, "planner": PlannerConfig, "disturbance": DisturbanceConfig}
MAX_LATENCY = 1000  # control steps


@dataclass(frozen=True)
class SimSettings:
    """Everything that configures an ArmEnv besides the task's name and the seed (picklable, hashable)."""

    arm: ArmConfig = field(default_factory=ArmConfig)  # the arm and its servo
    planner: PlannerConfig = field(default_factory=PlannerConfig)  # how hard the scripted expert drives the arm
    action_interface: str = "position"  # what an action is: position | velocity | ee_delta (see interfaces.py)
    disturbance: DisturbanceConfig = field(default_factory=DisturbanceConfig)  # unmodelled joint load
    sensor_noise: float = 0.0  # std of gaussian noise on the observed state (state units)
    observation_latency: int = 0  # observations (state and image) are this many control steps old
    # extras appended to the observed state, in this order: joint_velocity, target (vlash.sim.observations)
    observe: tuple[str, ...] = ()
    image_size: int = 96  # camera image side [px]
    task: tuple[tuple[str, Any], ...] = ()  # task config overrides (field, value), sorted; a mapping is accepted

    def __post_init__(self) -> None:
        for name, kind in SECTIONS.items():
            if not isinstance(getattr(self, name), kind):
                raise SimConfigError(f"{name} must be a {kind.__name__}, got {getattr(self, name)!r}")
        if self.action_interface not in INTERFACES:
            raise SimConfigError(
                f"action_interface must be one of {', '.join(INTERFACES)}, got {self.action_interface!r}"
            )
        noise = self.sensor_noise
        if isinstance(noise, bool) or not (isinstance(noise, int | float) and math.isfinite(noise) and noise >= 0):
            raise SimConfigError(f"sensor_noise must be a finite number >= 0, got {noise!r}")
        latency = self.observation_latency
        if isinstance(latency, bool) or not (isinstance(latency, int) and 0 <= latency <= MAX_LATENCY):
            raise SimConfigError(f"observation_latency must be an int in [0, {MAX_LATENCY}], got {latency!r}")
        object.__setattr__(self, "observe", check_observe(self.observe))
        size = self.image_size
        if isinstance(size, bool) or not (isinstance(size, int) and 16 <= size <= 1024):
            raise SimConfigError(f"image_size must be an int in [16, 1024], got {size!r}")
        try:
            items = list(self.task.items() if isinstance(self.task, Mapping) else self.task)
            pairs = [(str(key), value) for key, value in items]
        except (TypeError, ValueError):
            raise SimConfigError(f"task must map task config fields to values, got {self.task!r}") from None
        frozen = []
        for key, value in pairs:
            try:
                frozen.append((key, _frozen(value)))
            except TypeError:
                raise SimConfigError(f"setting 'task.{key}' must be a number, string or list, got {value!r}") from None
        object.__setattr__(self, "task", tuple(sorted(frozen)))

    @property
    def randomized(self) -> bool:
        """Whether a feature that draws random numbers per episode is on (a load or sensor noise)."""
        return self.disturbance.active or self.sensor_noise > 0

    def task_overrides(self) -> dict[str, Any]:
        return dict(self.task)

    def task_config(self, task: str, config_type: type, base: Any = None) -> Any:
        """`base` (default: config_type()) with this settings' task overrides applied; errors name the task."""
        base = config_type() if base is None else base
        if not self.task:
            return base
        return apply_fields(base, self.task_overrides(), prefix="task.", owner=f"task {task!r}")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (lists, no tuples); from_dict / a settings file read it back. `observe` is left out
        while empty, so the records of settings without extras (datasets, policies, results) read as before."""
        doc = {name: plain(dataclasses.asdict(getattr(self, name))) for name in SECTIONS}
        top = ("action_interface", "sensor_noise", "observation_latency", "image_size")
        observe = {"observe": list(self.observe)} if self.observe else {}
        return {**doc, **{name: getattr(self, name) for name in top}, **observe, "task": plain(self.task_overrides())}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], overrides: Sequence[str] = ()) -> SimSettings:
        """Settings from a (nested) dict like to_dict()'s, every key optional, then KEY=VALUE overrides."""
        flat = _flatten(doc, "")
        for item in overrides:
            flat.update(_flatten(_parse_override(item), ""))
        return _build(flat)


def load_sim_settings(path: str | Path | None, overrides: Sequence[str] = ()) -> SimSettings:
    """Settings from a YAML file (None: the defaults), then KEY=VALUE overrides with dotted keys."""
    if isinstance(overrides, str):
        raise SimConfigError(f"overrides must be a list of KEY=VALUE strings, got the string {overrides!r}")
    doc: Any = {}
    if path is not None:
        try:
            doc = yaml.safe_load(Path(path).read_text()) or {}
        except OSError as exc:
            raise SimConfigError(f"cannot read sim settings {str(path)!r}: {exc.strerror or exc}") from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1})" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise SimConfigError(f"sim settings {str(path)!r} are not valid YAML{where}: {problem}") from None
        if not isinstance(doc, Mapping):
            raise SimConfigError(
                f"sim settings {str(path)!r} must hold a mapping of settings, got {type(doc).__name__}"
            )
    return SimSettings.from_dict(doc, overrides)


def _frozen(value: Any) -> Any:
    """Lists become tuples (settings stay hashable); anything unhashable is refused."""
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    hash(value)
    return value


def _parse_override(item: str) -> dict[str, Any]:
    """Parse "a.b=VALUE" into {"a": {"b": VALUE}}, VALUE read as YAML."""
    key, sep, text = str(item).partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise SimConfigError(f"override must be KEY=VALUE with a dotted key (e.g. disturbance.scale=0.3), got {item!r}")
    try:
        value = yaml.safe_load(text) if text.strip() else None
    except yaml.YAMLError:
        raise SimConfigError(f"override {item!r}: the value is not a YAML scalar or list") from None
    for part in reversed(key.split(".")):
        value = {part: value}
    return value


def _flatten(doc: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """{"arm": {"max_velocity": 2}} -> {"arm.max_velocity": 2}; sections may be null (= nothing set)."""
    if not isinstance(doc, Mapping):
        raise SimConfigError(f"setting {prefix.rstrip('.')!r} must be a mapping, got {doc!r}")
    flat: dict[str, Any] = {}
    for key, value in doc.items():
        name = f"{prefix}{key}"
        if name in (*SECTIONS, "task") and value is None:
            continue
        if name in (*SECTIONS, "task"):
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def _build(flat: dict[str, Any]) -> SimSettings:
    defaults = SimSettings()
    sections: dict[str, dict[str, Any]] = {name: {} for name in (*SECTIONS, "task")}
    top: dict[str, Any] = {}
    top_names = [f.name for f in dataclasses.fields(SimSettings) if f.name not in sections]
    for key, value in flat.items():
        head, _, rest = key.partition(".")
        if head in sections and rest and "." not in rest:
            sections[head][rest] = value
        elif head in top_names and not rest:
            top[head] = coerce(value, type(getattr(defaults, head)), key)
        else:
            known = [*top_names, *(f"{name}.<field>" for name in sections)]
            raise SimConfigError(f"unknown sim setting {key!r}; known: {', '.join(known)}")
    built = {
        name: apply_fields(getattr(defaults, name), sections[name], prefix=f"{name}.", owner=name) for name in SECTIONS
    }
    try:
        return SimSettings(**built, **top, task=sections["task"])
    except SimConfigError as exc:
        raise SimConfigError(f"sim settings: {exc}") from None
