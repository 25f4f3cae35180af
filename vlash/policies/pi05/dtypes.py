"""The weight dtypes by the names the command line and device profiles use (no torch: the command line offers them
before anything heavy loads); vlash.policies.pi05.weights.resolve_dtype turns a name into the torch dtype."""

DTYPE_NAMES = {  # name -> torch's name of the dtype
    "fp32": "float32",
    "float32": "float32",
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "fp16": "float16",
    "float16": "float16",
}
