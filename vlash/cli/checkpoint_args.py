"""Command-line options for what LeRobot and openpi checkpoints do not store (`vlash serve`, `vlash convert`), and
their files checked before anything heavy is imported."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from vlash.cli.flags import ConfigFlags
from vlash.errors import ConfigError
from vlash.policies.formats.layouts import missing_tokenizer
from vlash.policies.names.hub import (
    PALIGEMMA_TOKENIZER,
    TOKENIZER_FILES,
    HubUnavailable,
    cached_repo,
    hub_repo_files,
    hub_snapshot,
    looks_like_hub_id,
)
from vlash.policies.names.local_paths import local_reason, missing_path_hint
from vlash.policies.names.source import looks_like_path
from vlash.policies.processing.tokenizer_files import SENTENCEPIECE_MODEL, TOKENIZER_JSON


@dataclass(frozen=True)
class CheckpointFileOptions:
    """What LeRobot and openpi checkpoint directories do not store."""

    # PaliGemma's tokenizer.model / tokenizer.json (or its folder, or a Hugging Face repo id); LeRobot < 0.6.2 and
    # openpi ship none: without it, pi0.5's from the Hugging Face cache (or downloaded)
    tokenizer: Path | None = None
    # the model's shapes when not pi0.5's full size (e.g. pi05-tiny for test checkpoints)
    model_config: str | None = field(default=None, metadata={"metavar": "PRESET|YAML"})
    asset_id: str | None = field(default=None, metadata={"metavar": "ID"})  # openpi: assets/ID/norm_stats.json to use
    # openpi: the prompt carries no state (configs with discrete_state_input=False, e.g. pi05_libero)
    no_state_in_prompt: bool = False
    # openpi: DeltaActions per action dim, 1 = relative to the state (pi05_aloha: 1,1,1,1,1,1,0,1,1,1,1,1,1,0)
    relative_mask: str | None = field(default=None, metadata={"metavar": "0,1,..."})


CHECKPOINT_FLAGS = ConfigFlags(
    CheckpointFileOptions,
    "tokenizer model_config asset_id no_state_in_prompt relative_mask",
    title="LeRobot / openpi checkpoints",
    notes={"tokenizer": f"({PALIGEMMA_TOKENIZER})"},
    late=True,
)


def parse_mask(text: str | None) -> tuple[bool, ...] | None:
    """ "1,0,1" -> (True, False, True); ConfigError naming the text otherwise."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    if not parts or any(p not in ("0", "1") for p in parts):
        raise ConfigError(f"--relative-mask must be comma-separated 0/1 per action dim, got {text!r}")
    return tuple(p == "1" for p in parts)


def check_checkpoint_files(args: argparse.Namespace, directory: Path | None, layout: str | None) -> None:
    """The files the flags name exist, and a LeRobot / openpi checkpoint (`directory` of `layout`; None: no such
    checkpoint) without a tokenizer of its own is given --tokenizer: found now, before torch is imported, not after
    its weights loaded."""
    resolve_tokenizer_flag(args)
    model_config = args.model_config
    if model_config is not None and looks_like_path(model_config) and not Path(model_config).expanduser().is_file():
        hint = missing_path_hint(model_config, dirs_only=False)
        raise ConfigError(f"--model-config {model_config!r}: no such file{hint}")
    if directory is not None and layout is not None and args.tokenizer is None:
        reason = missing_tokenizer(directory, layout)
        if reason is not None:  # pi0.5's own tokenizer from the Hugging Face cache, else why not
            args.tokenizer = default_tokenizer(reason.partition(": pass --tokenizer")[0])


def resolve_tokenizer_flag(args: argparse.Namespace) -> None:
    """--tokenizer: a file or folder here, else a Hugging Face repo id (cached or downloaded) where no local folder
    explains the value better (vlash.policies.names.local_paths); one-line errors."""
    if args.tokenizer is None or args.tokenizer.exists():
        return
    value = str(args.tokenizer)
    if looks_like_hub_id(value) and (local_reason(value) is None or cached_repo(value, TOKENIZER_FILES)):
        args.tokenizer = hub_snapshot(value, "--tokenizer", TOKENIZER_FILES)
        return
    raise ConfigError(f"--tokenizer {value!r}: no such file or directory{missing_path_hint(value, dirs_only=False)}")


def default_tokenizer(what: str) -> Path:
    """pi0.5's tokenizer (PALIGEMMA_TOKENIZER) from the Hugging Face cache, else downloaded, for a checkpoint that
    has none (`what`: "DIR has no tokenizer (...)"); ConfigError saying what to do in one line otherwise."""
    try:
        return hub_snapshot(PALIGEMMA_TOKENIZER, "--tokenizer", TOKENIZER_FILES, purpose="pi0.5's tokenizer")
    except HubUnavailable as exc:
        raise ConfigError(
            f"{what}; pi0.5's tokenizer, the Hugging Face repo {PALIGEMMA_TOKENIZER}, {exc.why}: {exc.fix}, or pass "
            "--tokenizer PATH to PaliGemma's tokenizer.json or tokenizer.model"
        ) from None


def check_tokenizer_first(args: argparse.Namespace, repo: str) -> None:
    """Before the Hub checkpoint `repo` downloads: the --tokenizer given, or, when the repo holds no tokenizer file,
    pi0.5's default one, so that a gated or unreachable tokenizer repo is said before the weights download, not
    after."""
    resolve_tokenizer_flag(args)
    if args.tokenizer is not None:
        return
    files = hub_repo_files(repo)  # None: not listable (gated, absent, offline); the checkpoint's download says why
    if files is not None and not any(Path(name).name in (TOKENIZER_JSON, SENTENCEPIECE_MODEL) for name in files):
        args.tokenizer = default_tokenizer(f"the Hugging Face checkpoint {repo} has no tokenizer")


def checkpoint_options(args: argparse.Namespace):
    """The CheckpointOptions the flags ask for (imports the model code: call it when the command runs, after
    `check_checkpoint_files`)."""
    from vlash.policies.formats.base import CheckpointOptions  # extra: server
    from vlash.policies.pi05.config import load_preset  # extra: server

    return CheckpointOptions(
        tokenizer=args.tokenizer,
        model_config=None if args.model_config is None else load_preset(args.model_config),
        asset_id=args.asset_id,
        state_in_prompt=False if args.no_state_in_prompt else None,
        relative_mask=parse_mask(args.relative_mask),
    )
