"""Engine-independent flow sampler for pi0.5-style flow matching (docs/METHODS.md "Flow sampling").

t = 1 is noise, t = 0 is data, v ≈ eps - a; Euler in fp32 with per-token time tau [B, H].
Constant or horizon-aware schedule, committed-prefix clamp, streaming of final actions,
early stop, and opt-in guided inference-time RTC; per row of a batch (`stack_plans`, `BatchStepper`).
"""

from vlash.sampling.batch import BatchStepper, RowDone, RowFinal
from vlash.sampling.guidance import GuidanceConfig, guidance_weight, guided_velocity, rtc_soft_mask
from vlash.sampling.plan import SamplingPlan, stack_plans
from vlash.sampling.results import NOT_FINAL, PREFIX, FinalActions, SampleResult
from vlash.sampling.sampler import FlowSampler, SamplerConfig, SamplingRun
from vlash.sampling.schedules import (
    Schedule,
    build_tau_grid,
    constant_tau_grid,
    global_times,
    horizon_aware_tau,
    horizon_aware_tau_grid,
)
from vlash.sampling.velocity import VelocityFn

__all__ = [
    "NOT_FINAL",
    "PREFIX",
    "BatchStepper",
    "FinalActions",
    "FlowSampler",
    "GuidanceConfig",
    "RowDone",
    "RowFinal",
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
