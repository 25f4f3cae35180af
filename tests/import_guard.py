"""Python source that makes heavy imports fail, for tests that run a script in a fresh interpreter."""

import textwrap

# Prepend to a script run with `python -c`: importing any of HEAVY (or a submodule) raises ImportError.
BLOCK_HEAVY_IMPORTS = textwrap.dedent(
    """
    import importlib.abc, sys
    HEAVY = ("torch", "engines", "quant", "safetensors", "tokenizers", "onnxruntime")
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in HEAVY:
                raise ImportError(f"blocked heavy import: {name}")
    sys.meta_path.insert(0, Block())
    """
)
