"""The fidelity gate a quantized artifact recorded, read where artifacts load.

`vlash quantize --check` (vlash.quant) stores its verdict in the artifact's own manifest: `quant.json`'s `fidelity`
(torch weight-only policy directories) or `manifest.json["quantization"]["fidelity"]` (engine artifacts). Serving
and benchmarking sit below vlash.quant, so they read the verdict here and refuse an artifact whose gate failed
unless told `allow_failed=True` (the CLIs' --allow-failed-gate). An artifact quantized without --check is allowed
and said to be unchecked.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vlash.errors import CheckpointError

log = logging.getLogger(__name__)
ALLOW_FLAG = "--allow-failed-gate"


class FailedGateError(CheckpointError):
    """A quantized artifact whose recorded fidelity gate failed was about to be used."""


def _fmt(value: Any, spec: str) -> str:
    """`value` formatted with `spec`, "?" when the record lacks it (older or hand-edited manifests)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "?"
    return format(float(value), spec)


@dataclass(frozen=True)
class RecordedGate:
    """The verdict of the last `vlash quantize --check` on an artifact of `scheme` (None: never checked)."""

    scheme: str  # the quantization scheme, e.g. "onnx-int8-dynamic"
    fidelity: Mapping[str, Any] | None  # the stored check result (vlash.quant.check.GateResult.to_dict + thresholds)

    def __post_init__(self) -> None:
        if self.fidelity is None:
            return
        if not isinstance(self.fidelity, Mapping) or not isinstance(self.fidelity.get("passed"), bool):
            raise CheckpointError(
                f"quantized artifact ({self.scheme}): its recorded fidelity gate has no true/false 'passed' "
                f"({self.fidelity!r:.80}); run `vlash quantize --check` again"
            )

    @classmethod
    def from_quantization(cls, record: Mapping[str, Any] | None) -> RecordedGate | None:
        """From an engine artifact's manifest.json["quantization"]; None when the artifact is not quantized."""
        if record is None:
            return None
        fidelity = record.get("fidelity")
        variant = fidelity.get("variant") if isinstance(fidelity, Mapping) else None
        return cls(str(record.get("scheme") or variant or "quantized"), fidelity)  # TensorRT records no scheme

    @property
    def checked(self) -> bool:
        return self.fidelity is not None

    @property
    def passed(self) -> bool:
        """True only for a gate that was checked and passed."""
        return self.fidelity is not None and self.fidelity["passed"]

    @property
    def verdict(self) -> str:
        """PASS, FAIL or never checked."""
        return "never checked" if not self.checked else ("PASS" if self.passed else "FAIL")

    def metrics(self) -> str:
        """The measured metrics beside their thresholds, e.g. "action cosine min 0.9787 (gate >= 0.99), ..."."""
        if self.fidelity is None:
            return "no fidelity check recorded (vlash quantize --check)"
        actions = self.fidelity.get("actions") or {}
        limits = self.fidelity.get("thresholds") or {}
        cosine, max_abs = _fmt(actions.get("cosine_min"), ".4f"), _fmt(actions.get("max_abs_error"), ".4f")
        parts = [
            f"action cosine min {cosine} (gate >= {_fmt(limits.get('min_cosine'), 'g')})",
            f"max abs {max_abs} (gate <= {_fmt(limits.get('max_abs_error'), 'g')})",
        ]
        rollout, reference = self.fidelity.get("rollout"), self.fidelity.get("reference_rollout")
        if isinstance(rollout, Mapping) and isinstance(reference, Mapping):
            parts.append(
                f"sim success {_fmt(rollout.get('success_rate'), '.0%')} (fp32 "
                f"{_fmt(reference.get('success_rate'), '.0%')}, may drop {_fmt(limits.get('max_success_drop'), '.0%')})"
            )
        return ", ".join(parts)

    def describe(self) -> str:
        """One line: the verdict, why it failed, and the metrics against their thresholds."""
        if self.fidelity is None:
            return f"{self.scheme} gate never checked: {self.metrics()}"
        reasons = [str(r) for r in self.fidelity.get("reasons") or []]
        why = f" ({'; '.join(reasons)})" if reasons and not self.passed else ""
        return f"{self.scheme} gate {self.verdict}{why}: {self.metrics()}"


def require_gate(gate: RecordedGate | None, where: str, allow_failed: bool = False) -> None:
    """Refuse (FailedGateError) an artifact whose recorded gate failed unless `allow_failed`; warn when the gate
    was never checked or failed and is allowed. `gate` None: not a quantized artifact, nothing to check."""
    if gate is None or gate.passed:
        return
    if not gate.checked:
        log.warning(
            "%s is quantized (%s) but its fidelity gate was never checked: run `vlash quantize --check`",
            where,
            gate.scheme,
        )
        return
    if allow_failed:
        log.warning("%s failed its fidelity gate, used anyway (%s): %s", where, ALLOW_FLAG, gate.describe())
        return
    raise FailedGateError(
        f"{where} failed its fidelity gate, so it is not used: {gate.describe()}; quantize the policy again (e.g. "
        f"with another scheme) or pass {ALLOW_FLAG} to use it anyway"
    )
