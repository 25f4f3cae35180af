"""Forward and analytic inverse kinematics of the 2-link planar arm (angles in radians, world units).

Joint 0 rotates the whole arm about the base (world origin), joint 1 is the elbow, relative to link 0.
All functions accept batches: joint arrays [..., 2], position arrays [..., 2].
"""

from __future__ import annotations

import math

import numpy as np

TWO_PI = 2.0 * math.pi


def forward(q: np.ndarray, links: tuple[float, float]) -> np.ndarray:
    """End-effector position [..., 2] of joint angles q [..., 2]."""
    q = np.asarray(q, dtype=np.float64)
    if q.shape == (2,):
        a0, a01 = float(q[0]), float(q[0] + q[1])
        return np.array(
            [links[0] * math.cos(a0) + links[1] * math.cos(a01), links[0] * math.sin(a0) + links[1] * math.sin(a01)]
        )
    a0, a01 = q[..., 0], q[..., 0] + q[..., 1]
    x = links[0] * np.cos(a0) + links[1] * np.cos(a01)
    y = links[0] * np.sin(a0) + links[1] * np.sin(a01)
    return np.stack([x, y], axis=-1)


def elbow_position(q: np.ndarray, links: tuple[float, float]) -> np.ndarray:
    """Elbow position [..., 2]."""
    q = np.asarray(q, dtype=np.float64)
    return links[0] * np.stack([np.cos(q[..., 0]), np.sin(q[..., 0])], axis=-1)


def radius_range(links: tuple[float, float], elbow_limit: float) -> tuple[float, float]:
    """Smallest and largest base distance the end effector can reach with |q1| <= elbow_limit."""
    l0, l1 = links
    inner = math.sqrt(max(l0 * l0 + l1 * l1 + 2 * l0 * l1 * math.cos(min(elbow_limit, math.pi)), 0.0))
    return inner, l0 + l1


def _wrap_near(angle: np.ndarray, ref: np.ndarray, low: float, high: float) -> np.ndarray:
    """angle + 2*pi*k closest to ref, kept within [low, high] when some k allows it."""
    k = np.round((ref - angle) / TWO_PI)
    out = angle + TWO_PI * k
    out = np.where(out > high, out - TWO_PI, out)
    out = np.where(out < low, out + TWO_PI, out)
    return out


def inverse(
    xy: np.ndarray,
    links: tuple[float, float],
    q_ref: np.ndarray,
    limits: np.ndarray,
) -> np.ndarray:
    """Joint angles [..., 2] reaching xy, on the branch continuous with q_ref.

    The elbow keeps the sign of q_ref[..., 1] (positive when it is exactly 0), and joint 0 is the
    2*pi-equivalent angle nearest to q_ref[..., 0] within its limits. Unreachable points are
    projected onto the reachable annulus (the arm points at them as far as it can).
    """
    xy = np.asarray(xy, dtype=np.float64)
    q_ref = np.asarray(q_ref, dtype=np.float64)
    if xy.shape == (2,) and q_ref.shape == (2,):
        return np.array(_inverse_one(float(xy[0]), float(xy[1]), links, float(q_ref[0]), float(q_ref[1]), limits))
    l0, l1 = links
    r_min, r_max = radius_range(links, float(limits[1, 1]))
    r = np.clip(np.hypot(xy[..., 0], xy[..., 1]), r_min, r_max)
    cos_q1 = np.clip((r * r - l0 * l0 - l1 * l1) / (2 * l0 * l1), -1.0, 1.0)
    sign = np.where(q_ref[..., 1] < 0, -1.0, 1.0)
    q1 = sign * np.arccos(cos_q1)
    q0 = np.arctan2(xy[..., 1], xy[..., 0]) - np.arctan2(l1 * np.sin(q1), l0 + l1 * np.cos(q1))
    q0 = _wrap_near(q0, q_ref[..., 0], float(limits[0, 0]), float(limits[0, 1]))
    return np.stack([q0, np.clip(q1, limits[1, 0], limits[1, 1])], axis=-1)


def _inverse_one(
    x: float, y: float, links: tuple[float, float], ref0: float, ref1: float, limits: np.ndarray
) -> tuple[float, float]:
    """Scalar version of `inverse` (same results; the per-step hot path)."""
    l0, l1 = links
    r_min, r_max = radius_range(links, float(limits[1, 1]))
    r = min(max(math.hypot(x, y), r_min), r_max)
    cos_q1 = min(max((r * r - l0 * l0 - l1 * l1) / (2 * l0 * l1), -1.0), 1.0)
    q1 = math.acos(cos_q1) * (-1.0 if ref1 < 0 else 1.0)
    q0 = math.atan2(y, x) - math.atan2(l1 * math.sin(q1), l0 + l1 * math.cos(q1))
    q0 += TWO_PI * round((ref0 - q0) / TWO_PI)
    low, high = float(limits[0, 0]), float(limits[0, 1])
    if q0 > high:
        q0 -= TWO_PI
    if q0 < low:
        q0 += TWO_PI
    return q0, min(max(q1, float(limits[1, 0])), float(limits[1, 1]))
