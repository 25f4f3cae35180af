"""Synthetic expert episodes for the training tests: a dot in the image marks where the 2 joints go."""

from __future__ import annotations

import numpy as np

from vlash.train.episodes import Episode

INSTRUCTIONS = {"reach": "reach the red dot", "track": "follow the moving target"}


def ramp_episode(length: int = 30, joints: int = 2, task: str = "reach", seed: int = 0) -> Episode:
    """actions[t] = (t, -t, ...) / 10, states[t] = actions[t] - 0.05: every frame is identifiable."""
    t = np.arange(length, dtype=np.float32)[:, None]
    signs = np.where(np.arange(joints) % 2 == 0, 1.0, -1.0).astype(np.float32)
    actions = (t / 10.0 * signs).astype(np.float32)
    images = np.zeros((length, 16, 16, 3), dtype=np.uint8)
    images[:, 0, 0, 0] = np.arange(length) % 256
    return Episode(task, INSTRUCTIONS.get(task, task), images, actions - 0.05, actions, seed)


def dot_episode(task: str, seed: int, length: int = 40, size: int = 32) -> Episode:
    """The arm moves from a random start to the target shown as a white dot (one per episode)."""
    rng = np.random.default_rng(seed)
    target = rng.uniform(-1.0, 1.0, size=2).astype(np.float32)
    start = rng.uniform(-1.0, 1.0, size=2).astype(np.float32)
    frac = np.minimum(np.arange(1, length + 1) / (0.6 * length), 1.0)[:, None].astype(np.float32)
    actions = start + (target - start) * frac
    states = np.concatenate([start[None], actions[:-1]]).astype(np.float32)
    images = np.zeros((length, size, size, 3), dtype=np.uint8)
    px = ((target + 1.0) / 2.0 * (size - 4)).astype(int) + 2
    images[:, px[1] - 2 : px[1] + 2, px[0] - 2 : px[0] + 2] = 255
    return Episode(task, INSTRUCTIONS[task], images, states, actions.astype(np.float32), seed)


def dot_episodes(count: int, seed: int = 0) -> list[Episode]:
    tasks = list(INSTRUCTIONS)
    return [dot_episode(tasks[i % len(tasks)], seed * 1000 + i, length=30 + 10 * (i % 2)) for i in range(count)]
