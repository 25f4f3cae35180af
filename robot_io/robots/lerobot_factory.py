"""Build a LeRobot robot through LeRobot's own config registry and factory: `lerobot:<type>` + a YAML of its fields.

    robot = make_lerobot_robot("so101_follower", load_robot_config("configs/robots/so101.yaml"))

The YAML holds the fields of the type's LeRobot config (port, id, cameras, ...), exactly as LeRobot's
`--robot.*` options name them. The config class is found in LeRobot's registry (`RobotConfig`, a draccus
ChoiceRegistry): a type registers when its module is imported, so the module named after the type is tried first
(`lerobot.robots.so101_follower` up to LeRobot 0.4.2, `lerobot.robots.so_follower` from 0.4.3: the type with its
digits dropped), then every submodule of `lerobot.robots` until the type is known. Camera types are found the same
way under `lerobot.cameras`. The dict becomes the config with `draccus.decode(RobotConfig, {"type": ..., ...})`
and the robot comes from `lerobot.robots.make_robot_from_config`. lerobot, draccus and yaml are imported here,
inside the functions, so robot_io imports without them.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from robot_io.robots.base import RobotConfigError
from robot_io.robots.lerobot_robot import LeRobotRobot

INSTALL_HINT = "pip install 'vlash[lerobot]'"


def _lerobot(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] in ("lerobot", "draccus"):
            raise RobotConfigError(f"LeRobot robots need LeRobot, which is not installed: {INSTALL_HINT}") from None
        raise


def load_robot_config(path: str | Path) -> dict[str, Any]:
    """The fields of a robot config YAML file (a mapping); RobotConfigError naming the file otherwise."""
    import yaml  # extra: lerobot (a LeRobot robot's config file; the robot side imports without yaml)

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise RobotConfigError(f"robot config {path}: cannot read it ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise RobotConfigError(f"robot config {path}: not valid YAML ({' '.join(str(exc).split())})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise RobotConfigError(f"robot config {path}: expected a mapping of config fields, got {type(data).__name__}")
    return data


def _candidates(package: str, name: str) -> list[str]:
    """Modules that may register `name`: the one named after it, then the same without digits (so101 -> so)."""
    names = [name, re.sub(r"\d+", "", name)]
    return [f"{package}.{n}" for n in dict.fromkeys(names) if n.isidentifier()]


def _try_import(module: str, failures: dict[str, str]) -> None:
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module == exc.name or module.startswith(exc.name + ".")):
            failures[module] = f"{type(exc).__name__}: {exc}"  # it exists but needs something not installed
    except ImportError as exc:
        failures[module] = f"{type(exc).__name__}: {exc}"


def find_choice(registry: Any, package: str, name: str, kind: str) -> Any:
    """The class registered as `name` in a draccus ChoiceRegistry, importing `package`'s modules until it is."""
    if name in registry.get_known_choices():
        return registry.get_choice_class(name)
    failures: dict[str, str] = {}
    tried = _candidates(package, name)
    for module in tried:
        _try_import(module, failures)
        if name in registry.get_known_choices():
            return registry.get_choice_class(name)
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__, package + "."):
        if info.name not in tried:
            _try_import(info.name, failures)
            if name in registry.get_known_choices():
                return registry.get_choice_class(name)
    broken = "; ".join(f"{m} ({e})" for m, e in failures.items())
    raise RobotConfigError(
        f"unknown LeRobot {kind} type {name!r}; known types: {sorted(registry.get_known_choices())}"
        + (f"; modules that failed to import: {broken}" if broken else "")
    )


def lerobot_robot_config(robot_type: str, fields: Mapping[str, Any] | None = None) -> Any:
    """LeRobot's config object for `robot_type` from a dict of its fields (a YAML's content)."""
    robots = _lerobot("lerobot.robots")
    draccus = _lerobot("draccus")
    find_choice(robots.RobotConfig, "lerobot.robots", robot_type, "robot")
    fields = dict(fields or {})
    given = fields.pop("type", robot_type)
    if given != robot_type:
        raise RobotConfigError(f"the robot config says type {given!r}, the robot spec lerobot:{robot_type}")
    cameras = fields.get("cameras") or {}
    if not isinstance(cameras, Mapping):
        raise RobotConfigError(f"robot config 'cameras' must map camera names to configs, got {cameras!r}")
    camera_types = {c.get("type") for c in cameras.values() if isinstance(c, Mapping) and c.get("type")}
    if camera_types:
        registry = _lerobot("lerobot.cameras").CameraConfig
        for camera_type in sorted(camera_types):
            find_choice(registry, "lerobot.cameras", camera_type, "camera")
    try:
        return draccus.decode(robots.RobotConfig, {"type": robot_type, **fields})
    except Exception as exc:  # draccus's decoding errors have no common base; setup error, reported with its text
        detail = " ".join(str(exc).split())
        raise RobotConfigError(f"LeRobot config for {robot_type!r}: {type(exc).__name__}: {detail}") from exc


def make_lerobot_robot(robot_type: str, fields: Mapping[str, Any] | None = None, **adapter: Any) -> LeRobotRobot:
    """The LeRobot robot of `robot_type` built by LeRobot's factory, wrapped as a robot_io Robot (not connected).
    `adapter`: LeRobotRobot's keyword arguments (extra robot_io cameras, max_frame_age_s)."""
    config = lerobot_robot_config(robot_type, fields)
    robots = _lerobot("lerobot.robots")
    try:
        robot = robots.make_robot_from_config(config)
    except ImportError as exc:  # the robot's driver needs a package LeRobot's extras bring (feetech, dynamixel, ...)
        raise RobotConfigError(f"LeRobot robot {robot_type!r} cannot be built: {exc}") from exc
    adapter.setdefault("robot_type", robot_type)  # the calibration command names it
    return LeRobotRobot(robot, **adapter)
