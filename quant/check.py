"""The fidelity gate (`vlash quantize --check`): action metrics on held-out sim frames, plus sim rollouts
when the policy is a trained one, for each quantized variant vs the fp32 torch reference."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from vlash.engines.base import Engine
from vlash.policies.formats.base import LoadedPolicy
from vlash.quant.calibration import FrameSpec, policy_tasks, sim_inputs
from vlash.quant.fidelity import ActionFidelity, GateThresholds, action_fidelity, action_gate
from vlash.quant.rollout import RolloutStats, rollout_gate, rollout_stats


@dataclass
class GateResult:
    variant: str  # scheme name (or a bench label)
    fidelity: ActionFidelity
    rollout: RolloutStats | None = None  # None: rollouts not run (untrained policy or disabled)
    reference_rollout: RolloutStats | None = None
    reasons: list[str] = field(default_factory=list)  # why it failed; empty = PASS

    @property
    def passed(self) -> bool:
        return not self.reasons

    def to_dict(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "passed": self.passed,
            "reasons": list(self.reasons),
            "actions": self.fidelity.to_dict(),
            "rollout": None if self.rollout is None else self.rollout.to_dict(),
            "reference_rollout": None if self.reference_rollout is None else self.reference_rollout.to_dict(),
        }


def is_trained(policy: LoadedPolicy) -> bool:
    """A policy trained by vlash.train (rollout success means something); random-weight ones are not."""
    return policy.metadata.get("trained_by") == "vlash.train"


def check_variant(
    name: str,
    reference: Engine,
    candidate: Engine,
    policy: LoadedPolicy,
    thresholds: GateThresholds | None = None,
    held_out: FrameSpec | None = None,
    rollout_episodes: int = 0,
    reference_rollout: RolloutStats | None = None,
) -> GateResult:
    """Gate one variant. `rollout_episodes` > 0 also runs sim episodes per task (reference reused if given)."""
    thresholds = thresholds or GateThresholds()
    tasks = policy_tasks(policy.metadata)
    spec = held_out or FrameSpec(tasks=tasks, held_out=True)
    observations = [inputs for inputs, _ in sim_inputs(policy.processor, spec, device=str(reference.device))]
    fidelity = action_fidelity(
        reference, candidate, observations, policy.processor.action_dims, policy.config.num_steps
    )
    result = GateResult(name, fidelity, reasons=action_gate(fidelity, thresholds))
    if rollout_episodes > 0:
        ref = reference_rollout or rollout_stats(policy, reference, tasks, rollout_episodes)
        got = rollout_stats(policy, candidate, tasks, rollout_episodes)
        result.rollout, result.reference_rollout = got, ref
        result.reasons += rollout_gate(ref, got, thresholds.max_success_drop, thresholds.max_jerk_ratio)
    return result


def format_table(results: Sequence[GateResult]) -> str:
    """A plain-text table: one row per variant, PASS/FAIL with the reasons."""
    header = f"{'variant':<20} {'cos min':>8} {'cos mean':>9} {'max abs':>8} {'success':>14} {'jerk':>18}  gate"
    lines = [header, "-" * len(header)]
    for r in results:
        f = r.fidelity
        success = jerk = "-"
        if r.rollout is not None and r.reference_rollout is not None:
            success = f"{r.rollout.success_rate:.0%} (fp32 {r.reference_rollout.success_rate:.0%})"
            jerk = f"{r.rollout.jerk:.3g} ({r.reference_rollout.jerk:.3g})"
        verdict = "PASS" if r.passed else "FAIL: " + "; ".join(r.reasons)
        lines.append(
            f"{r.variant:<20} {f.cosine_min:>8.4f} {f.cosine_mean:>9.4f} {f.max_abs_error:>8.4f} "
            f"{success:>14} {jerk:>18}  {verdict}"
        )
    return "\n".join(lines)
