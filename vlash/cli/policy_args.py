"""`--policy` (with `--checkpoint` as its synonym where commands had it, and `--random-weights`) the same way in
every command: vlash.policies.names.source resolves the value, the command says which kinds it takes."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from vlash.cli.flags import ConfigFlags
from vlash.errors import ConfigError
from vlash.policies.names.hub import HubUnavailable
from vlash.policies.names.source import PolicyKind, PolicySource, resolve_policy, with_base_weights

KIND_HELP = {
    PolicyKind.SHIPPED: "a shipped policy's name (checkpoints/)",
    PolicyKind.DIRECTORY: "a policy directory (or a Hugging Face repo id, owner/name)",
    PolicyKind.ARTIFACT: "an exported artifact",
    PolicyKind.PRESET: "a preset or YAML model config",
    PolicyKind.ORACLE: "'oracle'",
}


def accepted_help(accepted: dict[PolicyKind, str]) -> str:
    """E.g. "a shipped policy's name (checkpoints/), a preset or YAML model config (with --random-weights)"."""
    return ", ".join(f"{KIND_HELP[kind]}{f' ({use})' if use else ''}" for kind, use in accepted.items())


@dataclass(frozen=True)
class PolicyOptions:
    """Which policy."""

    policy: str | None = field(default=None, metadata={"metavar": "POLICY"})  # (its help: `policy_flags`)
    checkpoint: str | None = field(default=None, metadata={"metavar": "DIR"})  # the same as --policy (kept for scripts)
    random_weights: bool = False  # --policy names a preset: build it with random weights


@dataclass(frozen=True)
class RequiredPolicy:
    """Which policy (a command that needs one)."""

    policy: str = field(metadata={"metavar": "POLICY"})  # (its help: `policy_flags`)


# a command whose --policy has the synonym --checkpoint: one of the two, and not both (Command's pairs)
POLICY_OR_CHECKPOINT = (("policy", "checkpoint"),)


def policy_flags(
    what: str,
    accepted: dict[PolicyKind, str],
    required: bool = True,
    checkpoint: bool = False,
    random_weights: bool = False,
    title: str = "policy",
) -> ConfigFlags:
    """--policy VALUE (`what` it is for; its help lists the `accepted` kinds); `checkpoint`: --checkpoint VALUE as a
    synonym (exclusive with --policy: the command names POLICY_OR_CHECKPOINT); `random_weights`: the
    --random-weights flag (the value is then a preset)."""
    text = {"policy": f"{what}: {accepted_help(accepted)}"}
    if required and not checkpoint:
        return ConfigFlags(RequiredPolicy, "policy", title=title, help=text)
    names = ["policy", *(["checkpoint"] if checkpoint else []), *(["random_weights"] if random_weights else [])]
    return ConfigFlags(PolicyOptions, names, title=title, help=text)


def policy_value(args: argparse.Namespace) -> str | None:
    """The --policy value, or --checkpoint's where the command has that synonym."""
    value = getattr(args, "policy", None)
    return value if value is not None else getattr(args, "checkpoint", None)


def policy_flag(args: argparse.Namespace) -> str:
    """The flag that gave `policy_value`: --checkpoint when the synonym was used, else --policy."""
    return "--checkpoint" if getattr(args, "policy", None) is None and getattr(args, "checkpoint", None) else "--policy"


def policy_source(
    args: argparse.Namespace,
    command: str,
    accepted: dict[PolicyKind, str],
    hint: str = "",
    base_weights: bool = False,
) -> PolicySource:
    """The resolved --policy of `args`, refused with a one-line ConfigError unless its kind is in `accepted`. In a
    command with --random-weights a preset needs that flag: its weights would otherwise be a silent surprise.
    `base_weights` (a command that serves weights): a preset with a Hub checkpoint (`pi05`) is that checkpoint where
    it is cached or can be downloaded, and a ConfigError of three short lines where it is neither."""
    value = policy_value(args)
    has_flag = hasattr(args, "random_weights")
    random_weights = bool(getattr(args, "random_weights", False))
    source = resolve_policy(str(value), random_weights=random_weights, flag=policy_flag(args))
    if base_weights and source.kind is PolicyKind.PRESET and not source.random_weights:
        source, missing = with_base_weights(source)  # `--policy pi05`: pi0.5's base checkpoint where there is one
        if missing is not None:
            raise ConfigError(base_weights_missing(args, command, source, missing))
    if has_flag and source.kind is PolicyKind.PRESET and not source.random_weights:
        accepted = {kind: use for kind, use in accepted.items() if kind is not PolicyKind.PRESET}
        hint = "; ".join(h for h in ("add --random-weights to use it with random weights", hint) if h)
    return source.require(command, accepted, hint)


def base_weights_missing(args: argparse.Namespace, command: str, source: PolicySource, missing: HubUnavailable) -> str:
    """Three short lines for a preset whose Hub checkpoint is neither cached nor downloadable (`vlash serve --policy
    pi05`): what the name is, how to get its weights, and the command to run then."""
    device = getattr(args, "device", "auto")
    again = f"vlash {command} {source.flag} {source.value}{f' --device {device}' if device != 'auto' else ''}"
    return (
        f"{source.flag} {source.value} names a model's shapes (a preset); its weights are {missing.repo_id} on the "
        "Hugging Face Hub\n"
        f"  it {missing.why}: {missing.fix}\n"
        f"  then run: {again}   (or add --random-weights to try the wiring without weights)"
    )
