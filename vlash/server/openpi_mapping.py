"""openpi observations -> a vlash policy's inputs (cameras, state, prompt).

An openpi robot script sends a dict whose keys depend on the robot (DROID, LIBERO, ALOHA). An `ObservationMap`
says which key holds which policy camera, which keys are concatenated into the state and which holds the
prompt; nested dicts are addressed by "/"-joined paths ({"images": {"cam_high": x}} is "images/cam_high").
Built-in maps cover openpi's own robot scripts; a YAML file (the same fields) covers anything else. `auto`
picks the one map whose keys the observation uses: a built-in profile or the vlash-native
{"images": {policy camera: HWC}, "state": ..., "prompt": ...}.

Images become uint8 HWC as the vlash protocol carries them: CHW is transposed (always for ALOHA, when the
first axis is 3 otherwise, as openpi does), float images in [0, 1] are scaled by 255 and rounded. A camera
the observation leaves out is left out of the request (the policy masks it). An optional "seed" (int) fixes
the noise seed, as INFER.seed does; openpi scripts do not send it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from robot_io.protocol import Metadata
from vlash.dataclass_io import dataclass_from_mapping
from vlash.errors import ConfigError

log = logging.getLogger(__name__)
SEED_KEY = "seed"  # optional in every map: the request's noise seed
MAX_KEYS_SHOWN = 10  # observation keys an error message lists; then how many more
MAX_KEY_CHARS = 60  # characters of one key an error message shows


class ObservationError(ValueError):
    """An observation the map cannot turn into a request; the message names the keys (sent to the client)."""


@dataclass(frozen=True)
class Mapped:
    """An observation in the policy's terms: what an INFER carries."""

    images: dict[str, np.ndarray]  # policy camera -> uint8 [H, W, 3]
    state: np.ndarray  # float32 [state_dim]
    prompt: str
    seed: int | None
    profile: str  # the map that was used


@dataclass(frozen=True)
class ObservationMap:
    """How one robot's openpi observation maps onto a policy: the schema of an --openpi-map-file YAML file."""

    name: str  # shown in errors and in the metadata frame
    cameras: dict[str, str]  # observation key -> policy camera name
    state: list[str]  # observation keys whose values are concatenated, in this order, into the state
    prompt: str = "prompt"  # key of the task instruction (str or UTF-8 bytes)
    chw: bool | None = None  # images are CHW (True), HWC (False) or CHW when their first axis is 3 (None, "auto")
    ignore: list[str] = field(default_factory=list)  # keys accepted and not used (ALOHA's cam_low)
    default_prompt: str | None = None  # instruction for observations without one (else the server's default)
    skip_unknown_cameras: bool = False  # a camera the policy lacks is left out (True) or an error (False)

    def __post_init__(self) -> None:
        if not isinstance(self.cameras, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.cameras.items()
        ):
            raise ConfigError(f"openpi map {self.name!r}: cameras must map observation keys to camera names")
        for name in ("state", "ignore"):
            value = getattr(self, name)
            if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
                raise ConfigError(f"openpi map {self.name!r}: {name} must be a list of keys, got {value!r}")
        if not self.state:
            raise ConfigError(f"openpi map {self.name!r}: state must name at least one key")
        if self.chw not in (True, False, None):
            raise ConfigError(f"openpi map {self.name!r}: chw must be true, false or auto, got {self.chw!r}")
        if self.default_prompt is not None and not isinstance(self.default_prompt, str):
            raise ConfigError(f"openpi map {self.name!r}: default_prompt must be a string")
        keys = [*self.cameras, *self.state, self.prompt, *self.ignore, SEED_KEY]
        twice = sorted({k for k in keys if keys.count(k) > 1})
        if twice:
            raise ConfigError(f"openpi map {self.name!r}: keys {twice} are used twice")

    @property
    def keys(self) -> set[str]:
        """Every observation key this map accepts."""
        return {*self.cameras, *self.state, self.prompt, *self.ignore, SEED_KEY}

    def claims(self, keys: set[str]) -> bool:
        """True when `keys` are all accepted here and include one of its camera or state keys (for `auto`)."""
        return keys <= self.keys and bool(keys & {*self.cameras, *self.state})

    def apply(self, observation: dict[str, Any], metadata: Metadata, default_prompt: str | None = None) -> Mapped:
        """`observation` (flattened, see `flatten`) in the policy's terms; raises ObservationError."""
        unknown = set(observation) - self.keys
        if unknown:
            raise ObservationError(
                f"{self.name} map: unknown observation key(s) {key_list(unknown)}; it accepts {self._known}"
            )
        policy_cameras = [c.name for c in metadata.cameras]
        images = {}
        for key, camera in self.cameras.items():
            if key not in observation:
                continue  # left out: the policy masks this camera
            if camera not in policy_cameras:
                if not self.skip_unknown_cameras:
                    raise ObservationError(f"{self.name} map: {key!r} -> {camera!r}, the policy has {policy_cameras}")
                _warn_once(f"{self.name} map: {key!r} unused, the policy has no camera {camera!r}")
                continue
            images[camera] = to_image(observation[key], self.chw, key)
        prompt = observation.get(self.prompt)
        prompt = _text(prompt, self.prompt) if prompt is not None else (self.default_prompt or default_prompt)
        if prompt is None:
            raise ObservationError(f"no prompt: the observation has no {self.prompt!r} and the server no default")
        state = self._state(observation, metadata.state_dim)
        return Mapped(images, state, prompt, _seed(observation.get(SEED_KEY)), self.name)

    @property
    def _known(self) -> list[str]:
        return sorted(self.keys)

    def _state(self, observation: dict[str, Any], state_dim: int) -> np.ndarray:
        missing = [k for k in self.state if k not in observation]
        if missing:
            raise ObservationError(f"{self.name} map: missing state key(s) {missing}")
        parts = []
        for key in self.state:
            expected = f"{key!r}: expected a number or a 1-D numeric array"
            try:
                value = np.atleast_1d(np.asarray(observation[key]))
            except (ValueError, TypeError, OverflowError):  # a list nested unevenly: [[1], [1, 2]]
                raise ObservationError(f"{expected}, got a ragged list") from None
            if value.ndim != 1 or value.dtype.kind not in "biuf":
                raise ObservationError(f"{expected}, got {_describe(value)}")
            parts.append(value.astype(np.float32))
        state = np.concatenate(parts)
        if len(state) != state_dim:
            raise ObservationError(f"state: {self.state} give {len(state)} values, the policy takes {state_dim}")
        return state


def to_image(value: Any, chw: bool | None, key: str) -> np.ndarray:
    """An openpi image (uint8 or float in [0, 1]; HWC or CHW) as a contiguous uint8 [H, W, 3]."""
    if not isinstance(value, np.ndarray) or value.ndim != 3:
        raise ObservationError(f"{key!r}: expected an image [H, W, 3] or [3, H, W], got {_describe(value)}")
    if chw or (chw is None and value.shape[0] == 3):
        value = value.transpose(1, 2, 0)
    if value.shape[2] != 3:
        layout = "CHW" if chw else "HWC" if chw is False else "HWC or CHW"
        raise ObservationError(f"{key!r}: expected 3 channels ({layout}), got shape {value.shape}")
    if value.dtype.kind == "f":
        if not np.isfinite(value).all():
            raise ObservationError(f"{key!r}: float image holds NaN or inf")
        value = np.rint(np.clip(value, 0.0, 1.0) * 255.0).astype(np.uint8)
    elif value.dtype != np.uint8:
        raise ObservationError(f"{key!r}: images must be uint8 or float in [0, 1], got {value.dtype}")
    return np.ascontiguousarray(value)


def flatten(observation: Any) -> dict[str, Any]:
    """Nested dicts -> one level with "/"-joined keys; raises ObservationError on non-str or clashing keys.
    Iterative: the nesting is bounded by the codec (MAX_DEPTH), and never by Python's stack."""
    if not isinstance(observation, dict):
        raise ObservationError(f"an observation must be a map, got {type(observation).__name__}")
    out: dict[str, Any] = {}
    todo: list[tuple[str, dict]] = [("", observation)]  # (path prefix, map) still to walk, in key order
    while todo:
        prefix, node = todo.pop()
        nested = []
        for key, value in node.items():
            if not isinstance(key, str):
                raise ObservationError(f"observation keys must be strings, got {key!r:.40} under {_short(prefix)}")
            path = prefix + key
            if isinstance(value, dict) and value:
                nested.append((path + "/", value))
            elif path in out:
                raise ObservationError(f"ambiguous observation key {_short(path)}: given both flat and nested")
            else:
                out[path] = value
        todo.extend(reversed(nested))
    return out


def native_map(metadata: Metadata) -> ObservationMap:
    """vlash's own observation layout: {"images": {camera: HWC}, "state": ..., "prompt": ...}."""
    return ObservationMap("vlash", {f"images/{c.name}": c.name for c in metadata.cameras}, ["state"], chw=False)


PROFILES: dict[str, ObservationMap | None] = {  # --openpi-profile choices; None: detect per observation
    "auto": None,
    "droid": ObservationMap(
        "droid",
        {"observation/exterior_image_1_left": "base_0_rgb", "observation/wrist_image_left": "left_wrist_0_rgb"},
        ["observation/joint_position", "observation/gripper_position"],
        skip_unknown_cameras=True,
    ),
    "libero": ObservationMap(
        "libero",
        {"observation/image": "base_0_rgb", "observation/wrist_image": "left_wrist_0_rgb"},
        ["observation/state"],
        skip_unknown_cameras=True,
    ),
    "aloha": ObservationMap(
        "aloha",
        {
            "images/cam_high": "base_0_rgb",
            "images/cam_left_wrist": "left_wrist_0_rgb",
            "images/cam_right_wrist": "right_wrist_0_rgb",
        },
        ["state"],
        chw=True,  # openpi's ALOHA inputs are always CHW
        ignore=["images/cam_low"],
        skip_unknown_cameras=True,
    ),
}


def resolve(observation: dict[str, Any], metadata: Metadata) -> ObservationMap:
    """The `auto` choice: the one map (vlash-native or a built-in profile) that claims all the keys, else the one
    map that knows some of its camera or state keys (its `apply` then names the keys it does not know)."""
    candidates = [native_map(metadata), *(m for m in PROFILES.values() if m is not None)]
    keys = set(observation)
    matching = [m for m in candidates if m.claims(keys)]
    if len(matching) == 1:
        return matching[0]
    recognised = [m for m in candidates if keys & {*m.cameras, *m.state}]
    if not matching and len(recognised) == 1:
        return recognised[0]
    names = [m.name for m in (matching or candidates)]
    what = f"fit several maps {names}" if matching else f"fit none of the maps {names}"
    raise ObservationError(
        f"auto: observation keys {key_list(keys)} {what}; name one with --openpi-profile or --openpi-map-file"
    )


def load_map(path: str | Path) -> ObservationMap:
    """An ObservationMap from YAML; `extends: <profile>` starts from a built-in one; `chw: auto` means None."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read openpi map {path}: {exc}") from exc
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: an openpi map must be a mapping, got {type(doc).__name__}")
    base, name = doc.pop("extends", None), doc.pop("name", path.stem)
    if base is not None:
        if PROFILES.get(base) is None:
            raise ConfigError(f"{path}: extends must be one of {[k for k, v in PROFILES.items() if v]}, got {base!r}")
        doc = {**asdict(PROFILES[base]), **doc}
    doc["name"] = name
    if doc.get("chw") == "auto":
        doc["chw"] = None
    return dataclass_from_mapping(ObservationMap, doc, str(path), "openpi map", ConfigError)


def _text(value: Any, key: str) -> str:
    if isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind in "SU":
        value = value.item()
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            raise ObservationError(f"{key!r}: bytes are not UTF-8") from None
    if not isinstance(value, str):
        raise ObservationError(f"{key!r}: expected a string, got {_describe(value)}")
    return value


def _seed(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or not 0 <= int(value) < 2**63:
        raise ObservationError(f"{SEED_KEY!r}: expected an int in [0, 2**63), got {value!r:.40}")
    return int(value)


def key_list(keys: Iterable[str]) -> str:
    """Observation keys for an error message, sorted: at most MAX_KEYS_SHOWN, each shortened, then how many more."""
    keys = sorted(keys)
    shown = f"[{', '.join(_short(k) for k in keys[:MAX_KEYS_SHOWN])}]"
    return shown if len(keys) <= MAX_KEYS_SHOWN else f"{shown} and {len(keys) - MAX_KEYS_SHOWN} more"


def _short(key: str) -> str:
    """`key` quoted, cut to MAX_KEY_CHARS."""
    return repr(key) if len(key) <= MAX_KEY_CHARS else repr(key[:MAX_KEY_CHARS]) + "..."


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.dtype} array of shape {value.shape}"
    return type(value).__name__


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        log.warning(message)
