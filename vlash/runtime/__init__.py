"""The request -> chunk path shared by the policy server, the fleet, the evaluation harness and the benchmarks.

`request` holds the one request type (`ChunkRequest`) and the one event type of a request's progress (`RowEvent`),
torch-free; `policy_runtime` turns requests into their events (preprocess, engine prefill, the denoise loop,
postprocess); `loading` builds a `PolicyRuntime` from a shipped policy, a checkpoint directory, an exported artifact
or a preset with random weights. The package's names import torch only when `PolicyRuntime` is used.
"""

from vlash.lazy_exports import lazy_exports
from vlash.runtime.request import Cancelled, ChunkRequest, ChunkResult, RowEvent

__all__ = ["Cancelled", "ChunkRequest", "ChunkResult", "PolicyRuntime", "RowEvent"]
__getattr__ = lazy_exports(__name__, {"PolicyRuntime": ".policy_runtime"})
