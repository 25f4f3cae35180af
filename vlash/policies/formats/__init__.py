"""Checkpoint formats: vlash's own policy directory, LeRobot's, openpi's PyTorch and JAX checkpoints, each one module
behind `LoadedPolicy` / `CheckpointOptions` (base); `loading.load_policy` reads any of them.
"""
