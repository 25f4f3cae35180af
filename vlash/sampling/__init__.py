"""Engine-independent flow sampler for pi0.5-style flow matching (docs/METHODS.md "Flow sampling").

t = 1 is noise, t = 0 is data, v ≈ eps - a; Euler in fp32 with per-token time tau [B, H].
Constant or horizon-aware schedule, committed-prefix clamp, streaming of final actions,
early stop, and opt-in guided inference-time RTC; per row of a batch (`stack_plans`, `BatchStepper`).
A row's progress is one event type (`RowEvent`, vlash.sampling.events), the runtime's too.
`Schedule` and the names of `events` import without torch; the other names import it on first use.
"""

from vlash.lazy_exports import lazy_exports
from vlash.sampling.schedule_names import Schedule

_EXPORTS = {  # name -> submodule (each but .events imports torch): imported on first use
    "BatchStepper": ".batch",
    **dict.fromkeys(("GuidanceConfig", "guidance_weight", "guided_velocity", "rtc_soft_mask"), ".guidance"),
    **dict.fromkeys(("SamplerConfig", "SamplingPlan", "stack_plans"), ".plan"),
    **dict.fromkeys(("NOT_FINAL", "PREFIX", "Cancelled", "RowEvent", "SampleResult"), ".events"),
    **dict.fromkeys(("FlowSampler", "SamplingRun"), ".sampler"),
    **dict.fromkeys(
        ("build_tau_grid", "constant_tau_grid", "global_times", "horizon_aware_tau", "horizon_aware_tau_grid"),
        ".schedules",
    ),
    "VelocityFn": ".velocity",
}

__all__ = [
    "NOT_FINAL",
    "PREFIX",
    "BatchStepper",
    "Cancelled",
    "FlowSampler",
    "GuidanceConfig",
    "RowEvent",
    "SampleResult",
    "SamplerConfig",
    "SamplingPlan",
    "SamplingRun",
    "Schedule",
    "VelocityFn",
    "build_tau_grid",
    "constant_tau_grid",
    "global_times",
    "guidance_weight",
    "guided_velocity",
    "horizon_aware_tau",
    "horizon_aware_tau_grid",
    "rtc_soft_mask",
    "stack_plans",
]
__getattr__ = lazy_exports(__name__, _EXPORTS)
