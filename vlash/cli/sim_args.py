"""--sim-config / --sim: the simulator settings of `vlash eval`, `vlash train` and `vlash run --robot sim:<task>`
(vlash.sim.settings)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from vlash.cli.flags import ConfigFlags
from vlash.errors import ConfigError
from vlash.resources import config_dir

SHIPPED_SETTINGS = "position, velocity, velocity-load, velocity-observable, velocity-load-observable"


@dataclass(frozen=True)
class SimOptions:
    """The simulator's settings."""

    # a YAML file or a shipped name (configs/eval/*.yaml); default: position actions, no disturbance, the joint
    # positions as the state
    sim_config: Path | None = None
    # override one simulator setting, e.g. action_interface=velocity, disturbance.scale=0.3,
    # observe=[joint_velocity,target], task.hold_steps=45
    sim: tuple[str, ...] = field(default=(), metadata={"repeatable": True, "metavar": "KEY=VALUE"})


def sim_flags(what: str, advanced: bool = False) -> ConfigFlags:
    """--sim-config and --sim; `what` says what the settings are for (the group's title); `advanced`: shown under
    the command's advanced heading."""
    names = "sim_config sim"
    notes = {"sim_config": f"({SHIPPED_SETTINGS})"}
    if advanced:
        return ConfigFlags(SimOptions, (), title=what, notes=notes, advanced=names)
    return ConfigFlags(SimOptions, names, title=what, notes=notes)


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
