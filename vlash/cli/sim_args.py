"""--sim-config / --sim: the simulator settings of `vlash eval` and `vlash train` (vlash.sim.settings)."""

from __future__ import annotations

import argparse
from pathlib import Path

from vlash.errors import ConfigError
from vlash.resources import config_dir


def add_sim_arguments(p: argparse.ArgumentParser, what: str) -> None:
    """Add --sim-config and --sim; `what` says what the settings are for (help text)."""
    p.add_argument(
        "--sim-config",
        type=Path,
        default=None,
        help=f"simulator settings {what}: a YAML file or a shipped name (position, velocity, velocity-load, "
        "velocity-observable, velocity-load-observable: configs/eval/*.yaml); default: position actions, no "
        "disturbance, the joint positions as the state",
    )
    p.add_argument(
        "--sim",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one simulator setting, e.g. action_interface=velocity, disturbance.scale=0.3, "
        "observe=[joint_velocity,target], task.hold_steps=45 (repeatable)",
    )


def sim_config_path(value: Path | None) -> Path | None:
    """--sim-config: a YAML file, or the name of a shipped one (velocity-load: configs/eval/velocity-load.yaml)."""
    if value is None or value.is_file():
        return value
    shipped = config_dir("eval") / f"{value.name.removesuffix('.yaml')}.yaml"
    if str(value.parent) == "." and shipped.is_file():
        return shipped
    names = ", ".join(sorted(p.stem for p in config_dir("eval").glob("*.yaml")))
    raise ConfigError(f"--sim-config: no such file {value}; shipped settings: {names}")


def load_sim_arguments(args: argparse.Namespace):
    """The SimSettings --sim-config and --sim ask for (ConfigError naming the bad key or file)."""
    from vlash.sim.errors import SimConfigError  # extra: sim
    from vlash.sim.settings import load_sim_settings  # extra: sim

    try:
        return load_sim_settings(sim_config_path(args.sim_config), args.sim)
    except SimConfigError as exc:
        raise ConfigError(f"--sim-config / --sim: {exc}") from None
