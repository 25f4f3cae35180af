"""The request -> chunk path shared by the policy server, the fleet, the evaluation harness and the benchmarks.

A request is the wire's `Infer`, admitted once where it arrived (`admission`); `request` holds its outcome
(`ChunkResult`) and re-exports the one event type of its progress (`RowEvent`, vlash.sampling.events), torch-free;
`policy_runtime` turns requests into their events (preprocess, engine prefill, the denoise loop, postprocess);
`loading` builds a `PolicyRuntime` from a shipped policy, a checkpoint directory, an exported artifact or a preset
with random weights. The package's names import torch only when `PolicyRuntime` is used.
"""

from vlash.lazy_exports import lazy_exports
from vlash.runtime.request import Cancelled, ChunkResult, RowEvent, make_infer

__all__ = ["Cancelled", "ChunkResult", "PolicyRuntime", "RowEvent", "make_infer"]
__getattr__ = lazy_exports(__name__, {"PolicyRuntime": ".policy_runtime"})
