"""`vlash info --policy PRESET|NAME|DIR [--json]`: configuration and parameter counts per component (a preset's, or
the config a shipped policy, vlash policy directory or exported artifact stores; no weights are read)."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from vlash.cli.command import Command
from vlash.cli.flags import ConfigFlags
from vlash.cli.policy_args import policy_flags, policy_source
from vlash.policies.names.source import PolicyKind
from vlash.policies.pi05 import Pi05Config

if TYPE_CHECKING:
    from vlash.policies.pi05.model import Pi05Model

ACCEPTED = {
    PolicyKind.PRESET: "",
    PolicyKind.SHIPPED: "its stored config",
    PolicyKind.DIRECTORY: "vlash layout: its stored config",
    PolicyKind.ARTIFACT: "its policy's config",
}

COMPONENTS = {  # label -> parameter-name prefixes
    "vision tower (SigLIP)": ("vision.",),
    "projector": ("projector.",),
    "token embedding": ("vlm.embed_tokens.",),
    "VLM decoder (Gemma)": ("vlm.layers.", "vlm.norm."),
    "action expert (Gemma + adaRMS)": ("expert.",),
    "action/time heads": ("action_in_proj.", "action_out_proj.", "time_mlp_in.", "time_mlp_out."),
}


@dataclass(frozen=True)
class InfoOptions:
    """How to show it."""

    json: bool = False  # print JSON instead of a table


COMMAND = Command(
    "info",
    "show a policy's configuration and parameter counts",
    "Show a policy's configuration and parameter counts per component (no weights are read).",
    (policy_flags("the policy whose configuration to show", ACCEPTED), ConfigFlags(InfoOptions, title="output")),
)


def parameter_counts(model: Pi05Model) -> dict[str, int]:
    counts = {label: 0 for label in COMPONENTS}
    for name, p in model.named_parameters():
        label = next(lab for lab, prefixes in COMPONENTS.items() if name.startswith(prefixes))
        counts[label] += p.numel()
    counts["total"] = sum(counts.values())
    return counts


def describe_policy(config: Pi05Config, source: str) -> dict:
    import torch  # extra: server; after the policy was resolved: a path that does not exist is reported at once

    from vlash.policies.pi05.model import Pi05Model  # extra: server
    from vlash.policies.pi05.weights import UNUSED_KEYS  # extra: server

    with torch.device("meta"):  # no memory, instant even at 3.3B
        model = Pi05Model(config)
    cfg = config
    lm_heads = cfg.vocab_size * (cfg.vlm.width + cfg.expert.width)
    return {
        "policy": cfg.name,
        "source": source,
        "config": cfg.to_dict(),
        "prefix_tokens": cfg.prefix_len,
        "parameters": parameter_counts(model),
        "not_built": {"lm_heads (unused by an action policy)": lm_heads, "keys": list(UNUSED_KEYS)},
    }


def run(args: argparse.Namespace) -> int:
    source = policy_source(args, "info", ACCEPTED)
    where = source.describe() if source.path is None else f"{source.describe()}: {source.path}"
    info = describe_policy(source.config(), where)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    cfg = info["config"]
    console = Console()
    console.print(
        f"[bold]{info['policy']}[/]  cameras={cfg['camera_names']}  image={cfg['vision']['image_size']}px  "
        f"H={cfg['action_horizon']}  A={cfg['action_dim']}  prompt={cfg['max_token_len']} tokens  "
        f"prefix={info['prefix_tokens']} tokens  steps={cfg['num_steps']}"
    )
    console.print(f"  from {info['source']}")
    for part in ("vision", "vlm", "expert"):
        console.print(f"  {part}: " + ", ".join(f"{k}={v}" for k, v in cfg[part].items()))
    table = Table("component", "parameters", "share")
    total = info["parameters"]["total"]
    for label, count in info["parameters"].items():
        table.add_row(label, f"{count:,}", f"{100 * count / total:.1f}%")
    console.print(table)
    console.print(
        f"not built: LeRobot lm_head tensors, {info['not_built']['lm_heads (unused by an action policy)']:,} "
        "parameters (unused by an action policy)"
    )
    return 0
