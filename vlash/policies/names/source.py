"""What a `--policy` value names, resolved the same way by every command.

    oracle                      the scripted expert (the evaluation harness only)
    an existing directory       an exported engine artifact (manifest.json), else a policy directory: vlash,
                                LeRobot pi0.5 or openpi PyTorch (told apart by `layouts.detect_layout`)
    an existing .yaml file      a model config (shapes only, no weights)
    owner/name                  a Hugging Face Hub repo (where no such local path exists): its cached or downloaded
                                folder, then as a directory (vlash.policies.names.hub)
    pi05-tiny-sim               a shipped policy: checkpoints/<name>/, a vlash policy directory
    pi05-tiny                   a preset: configs/policies/<name>.yaml (shapes only, no weights)

A value that looks like a path (it has a slash, or starts with . or ~) is a path and nothing else, so a typo in
a directory name is "no such directory" (with the closest existing folder), not "no preset". `owner/name` is a
repo id only where no local folder explains it better (its parent folder exists here, or its first part is a near
miss of one: vlash.policies.names.local_paths), so `checkpoints/pi05-tiny-simm` is not looked up on the Hub.
Each command then takes the kinds it can use (`PolicySource.require`) and refuses the others by name; a command
that needs weights turns a preset with a Hub checkpoint (`pi05`) into that checkpoint where it is cached or can be
downloaded (`with_base_weights`). Resolving reads file names only; no weights load.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path

import yaml

from vlash.errors import CheckpointError, ConfigError
from vlash.policies.names.hub import (
    BASE_CHECKPOINTS,
    HubUnavailable,
    cached_repo,
    hub_offline,
    hub_snapshot,
    looks_like_hub_id,
)
from vlash.policies.names.local_paths import local_reason, missing_path_hint
from vlash.policies.names.shipped import available_shipped, shipped_policy_dir
from vlash.policies.pi05.config import Pi05Config, available_presets, config_from_dict, load_preset

ORACLE = "oracle"  # the scripted expert as the policy (vlash eval)
# = vlash.engines.artifact.MANIFEST and POLICY_DIR (a test checks): the engines layer sits above this one
ARTIFACT_MANIFEST = "manifest.json"
ARTIFACT_POLICY_DIR = "policy"
CONFIG_SUFFIXES = (".yaml", ".yml")
LAYOUT_NAMES = {"vlash": "vlash", "lerobot": "LeRobot", "openpi": "openpi PyTorch"}


class PolicyKind(Enum):
    """What a --policy value is; the value is how messages name the kind."""

    SHIPPED = "a shipped policy"
    DIRECTORY = "a policy directory"
    ARTIFACT = "an exported artifact"
    PRESET = "a preset"
    ORACLE = "the scripted-expert oracle"


@dataclass(frozen=True)
class PolicySource:
    """A resolved --policy value."""

    kind: PolicyKind
    value: str  # what was given
    path: Path | None = None  # the directory (shipped, directory, artifact) or a preset's YAML file; None otherwise
    layout: str | None = None  # directories: "vlash", "lerobot" or "openpi"; shipped: "vlash"
    random_weights: bool = False  # a preset whose weights are to be random (--random-weights)
    flag: str = "--policy"  # the flag that gave it (--checkpoint where a command keeps that synonym): messages name it
    hub_id: str | None = None  # the Hugging Face repo `path` was resolved from (its snapshot in the cache)

    @property
    def name(self) -> str:
        """The name clients and reports see: the shipped name, the repo's or directory's name, the preset's name."""
        if self.hub_id is not None:
            return self.hub_id.rpartition("/")[2]
        if self.path is not None and self.kind is not PolicyKind.SHIPPED:
            return self.path.resolve().name if self.path.is_dir() else self.path.stem
        return self.value

    def describe(self) -> str:
        """E.g. "a policy directory (LeRobot)", "a preset (model shapes, no weights)"."""
        if self.kind is PolicyKind.DIRECTORY:
            return f"{self.kind.value} ({LAYOUT_NAMES.get(self.layout or '', self.layout)})"
        if self.kind is PolicyKind.PRESET:
            return f"{self.kind.value} ({'random weights' if self.random_weights else 'model shapes, no weights'})"
        return self.kind.value

    def require(self, command: str, accepted: dict[PolicyKind, str], hint: str = "") -> PolicySource:
        """This source if its kind is one of `accepted` (kind -> a note on how the command uses it, or ""); else
        ConfigError: what the value is, and what the command takes."""
        if self.kind in accepted:
            return self
        takes = ", ".join(f"{kind.value}{f' ({use})' if use else ''}" for kind, use in accepted.items())
        hint = f"; {hint}" if hint else ""
        raise ConfigError(f"{self.flag} {self.value!r} is {self.describe()}; vlash {command} takes {takes}{hint}")

    def config(self) -> Pi05Config:
        """The model config without loading weights: a preset's, or a vlash directory's / artifact's config.yaml."""
        if self.kind is PolicyKind.PRESET:
            return load_preset(self.path or self.value)
        if self.kind is PolicyKind.ARTIFACT:
            assert self.path is not None
            return read_policy_config(self.path / ARTIFACT_POLICY_DIR)
        if self.kind in (PolicyKind.SHIPPED, PolicyKind.DIRECTORY) and self.layout == "vlash":
            assert self.path is not None
            return read_policy_config(self.path)
        raise CheckpointError(
            f"{self.value} is {self.describe()}: its config is read by loading it; `vlash convert` it to a vlash "
            "policy directory first"
        )


def read_policy_config(directory: Path) -> Pi05Config:
    """The `policy` section of a vlash policy directory's config.yaml (no weights, no torch)."""
    source = directory / "config.yaml"
    try:
        doc = yaml.safe_load(source.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise CheckpointError(f"cannot read {source}: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("policy"), dict):
        raise CheckpointError(f"{source} has no 'policy' section: not a vlash policy directory")
    return config_from_dict(doc["policy"])


def looks_like_path(value: str) -> bool:
    return "/" in value or "\\" in value or value.startswith((".", "~"))


def resolve_policy(value: str, random_weights: bool = False, flag: str = "--policy") -> PolicySource:
    """What `value` names (see the module docstring); CheckpointError / ConfigError saying what was looked for, with
    `flag` (the option that gave the value). `random_weights`: the value must be a preset (or a YAML config), whose
    weights will be random."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{flag} needs a value, got {value!r}")
    source = replace(_resolve(value, flag), flag=flag)
    if random_weights:
        if source.kind is not PolicyKind.PRESET:
            raise ConfigError(
                f"--random-weights builds random weights of a preset ({', '.join(available_presets())} or a YAML "
                f"config); {flag} {value!r} is {source.describe()}: drop --random-weights"
            )
        return replace(source, random_weights=True)
    return source


def _resolve(value: str, flag: str) -> PolicySource:
    if value == ORACLE:
        return PolicySource(PolicyKind.ORACLE, value)
    path = Path(value).expanduser()
    if path.is_dir():
        if (path / ARTIFACT_MANIFEST).is_file():
            return PolicySource(PolicyKind.ARTIFACT, value, path)
        return _directory(value, path)
    if path.is_file():
        if path.suffix.lower() in CONFIG_SUFFIXES:
            return PolicySource(PolicyKind.PRESET, value, path)
        raise CheckpointError(f"{flag} {value!r} is a file, neither a policy directory nor a YAML model config")
    if looks_like_hub_id(value):
        return _hub_directory(value, flag)
    if looks_like_path(value):
        raise CheckpointError(f"{flag} {value!r}: no such directory or file{missing_path_hint(value)}")
    if value in available_shipped():
        return PolicySource(PolicyKind.SHIPPED, value, shipped_policy_dir(value), "vlash")
    if value in available_presets():
        return PolicySource(PolicyKind.PRESET, value)
    raise ConfigError(
        f"{flag} {value!r} is not a shipped policy ({', '.join(available_shipped()) or 'none'}), a preset "
        f"({', '.join(available_presets())}), '{ORACLE}', or an existing directory or YAML file"
    )


def _hub_directory(value: str, flag: str) -> PolicySource:
    """`owner/name` with no such local path: the Hub repo (cached, else downloaded), unless a local folder explains
    the value better (vlash.policies.names.local_paths), which makes it a missing path unless the repo is cached."""
    why_local = local_reason(value)
    if why_local is None:
        return _directory(value, hub_snapshot(value, flag), value)
    cached = cached_repo(value)
    if cached is not None:
        return _directory(value, cached, value)
    raise CheckpointError(
        f"{flag} {value!r}: no such directory or file (a path, not a Hugging Face repo id: {why_local})"
        f"{missing_path_hint(value)}"
    )


def _directory(value: str, path: Path, hub_id: str | None = None) -> PolicySource:
    from vlash.policies.formats.layouts import detect_layout  # extra: server

    return PolicySource(PolicyKind.DIRECTORY, value, path, detect_layout(path), hub_id=hub_id)


def with_base_weights(source: PolicySource) -> tuple[PolicySource, HubUnavailable | None]:
    """For a command that needs weights: a preset with a Hub checkpoint (BASE_CHECKPOINTS) as that checkpoint's
    directory, when it is cached or can be downloaded; otherwise the source as it was and why not (None: the preset
    has no checkpoint, or it was found)."""
    repo = base_checkpoint(source)
    if repo is None:
        return source, None
    try:
        folder = hub_snapshot(repo, source.flag)
    except HubUnavailable as exc:
        return source, exc
    return replace(_directory(repo, folder, repo), flag=source.flag), None


def base_checkpoint(source: PolicySource) -> str | None:
    """The Hub checkpoint of a preset that has one (`pi05`: lerobot/pi05_base), unless its weights are random."""
    if source.kind is not PolicyKind.PRESET or source.path is not None or source.random_weights:
        return None
    return BASE_CHECKPOINTS.get(source.value)


def hub_download_of(value: str, random_weights: bool = False, base_weights: bool = False) -> str | None:
    """The Hub repo that resolving `value` would download (a repo id no local path explains; with `base_weights`, a
    preset's checkpoint), or None: found locally or in the cache, nothing on the Hub, or offline. No network."""
    if random_weights or hub_offline() or Path(value).expanduser().exists():
        return None
    if looks_like_hub_id(value) and local_reason(value) is None:
        repo = value
    elif base_weights and value in BASE_CHECKPOINTS and value not in available_shipped():
        repo = BASE_CHECKPOINTS[value]
    else:
        return None
    return None if cached_repo(repo) is not None else repo
