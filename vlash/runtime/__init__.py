"""The request -> chunk path shared by the policy server, the evaluation harness and the benchmarks.

`policy_runtime` turns one request into a stream of final actions (preprocess, engine prefill, flow sampling,
postprocess); `loading` builds a `PolicyRuntime` from a shipped policy, a checkpoint directory, an exported
artifact or a preset with random weights.
"""

from vlash.runtime.policy_runtime import ChunkPiece, ChunkRequest, ChunkResult, ChunkStream, PolicyRuntime

__all__ = ["ChunkPiece", "ChunkRequest", "ChunkResult", "ChunkStream", "PolicyRuntime"]
