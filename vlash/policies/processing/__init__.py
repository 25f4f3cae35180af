"""Robot observations <-> model tensors: the processor, images, normalization, tokenizers and the state/action
transforms (numpy and torch only, no simulator).
"""
