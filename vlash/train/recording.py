"""The episodes a run trains on: given, loaded from `TrainConfig.dataset`, or recorded in vlash.sim (and saved).

A dataset file remembers the simulator settings it was recorded with (`vlash.train.dataset`); loading one
recorded under other settings than the run's (another action interface, load, arm, ...) is refused, since its
actions would mean something else than the policy is trained for. So is one whose expert was executed otherwise
than the run asks (TrainConfig.demo_execution): its frames come from other states.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vlash.train.chunked_demos import ChunkedExecution
from vlash.train.config import TrainConfig
from vlash.train.dataset import load_episodes, recorded_execution, recorded_sim_settings, save_episodes
from vlash.train.episodes import Episode, record_episodes, success_rate
from vlash.train.errors import DatasetError, TrainError

log = logging.getLogger(__name__)


def gather_episodes(
    config: TrainConfig, episodes: Sequence[Episode] | None, horizon: int
) -> tuple[list[Episode], float]:
    """(episodes to train on, expert success rate): given, loaded from config.dataset, or recorded (and saved)
    in config.sim_settings() with `horizon` tail steps each (and, with config.plan_labels, `horizon + d_max`-step
    plans at every frame); without config.label_tail the tails are dropped, without config.plan_labels the plans."""
    if episodes is not None:
        found = list(episodes)
    elif config.dataset and Path(config.dataset).is_file():
        check_dataset_settings(config)
        found = load_episodes(config.dataset)
        log.info("loaded %d episodes from %s", len(found), config.dataset)
    else:
        found = record(config, horizon)
        if config.dataset:
            save_episodes(config.dataset, found, config.sim_settings().to_dict(), config.demo_execution().to_dict())
    if config.plan_labels and any(e.plans is None for e in found):
        where = f"the dataset {config.dataset}" if config.dataset else "the given episodes"
        raise TrainError(f"plan_labels needs per-frame expert plans, which {where} lacks; record it again")
    if not config.plan_labels:
        found = [dataclasses.replace(e, plans=None) for e in found]
    if not config.label_tail:
        found = [dataclasses.replace(e, tail=None) for e in found]
    elif any(e.tail is None for e in found):
        log.warning(
            "%d of %d episodes have no expert tail: their labels end at the episode's end",
            sum(e.tail is None for e in found),
            len(found),
        )
    rate = success_rate(found)
    kept = [e for e in found if e.success] if config.only_successful else found
    if not kept:
        raise TrainError(f"no usable episodes ({len(found)} recorded, expert success rate {rate:.0%})")
    return kept, rate


def record(config: TrainConfig, horizon: int) -> list[Episode]:
    """Every task's expert episodes in the run's simulator settings."""
    settings = config.sim_settings()
    tail = horizon if config.label_tail else 0
    plan_steps = horizon + config.d_max if config.plan_labels else 0
    found: list[Episode] = []
    for task in config.tasks:
        found += record_episodes(
            task,
            config.episodes_per_task,
            config.seed,
            config.image_size,
            config.progress,
            tail=tail,
            plan_steps=plan_steps,
            settings=settings,
            execution=config.demo_execution(),
        )
    return found


def check_dataset_settings(config: TrainConfig) -> None:
    """TrainError when config.dataset was recorded in other simulator settings than the run's (image size aside:
    images are resized to the policy's input anyway) or with the expert executed otherwise."""
    from vlash.sim.settings import SimSettings  # extra: sim

    recorded = recorded_sim_settings(config.dataset)
    wanted = _without_image_size(config.sim_settings().to_dict())
    got = _without_image_size(SimSettings().to_dict() if recorded is None else recorded)
    differ = sorted(key for key in wanted.keys() | got.keys() if wanted.get(key) != got.get(key))
    if differ:
        shown = ", ".join(f"{key}: {got.get(key)!r} (run: {wanted.get(key)!r})" for key in differ)
        raise TrainError(
            f"dataset {config.dataset} was recorded with other simulator settings ({shown}); "
            "give another --dataset path to record it again"
        )
    doc = recorded_execution(config.dataset)
    try:
        recorded_as = ChunkedExecution() if doc is None else ChunkedExecution(**doc)
    except (TypeError, TrainError) as exc:
        raise DatasetError(f"dataset {config.dataset}: execution {doc!r} is not an expert execution: {exc}") from None
    if recorded_as != config.demo_execution():
        raise TrainError(
            f"dataset {config.dataset} was recorded with the expert {recorded_as.describe()} "
            f"(run: {config.demo_execution().describe()}); give another --dataset path to record it again"
        )


def _without_image_size(doc: dict[str, Any]) -> dict[str, Any]:
    """Flattened settings ("arm.max_velocity": 3.0), image_size left out."""
    flat: dict[str, Any] = {}
    for key, value in doc.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{name}": v for name, v in value.items()})
        elif key != "image_size":
            flat[key] = value
    return flat
