"""Quantization for vlash: offline quantize -> artifact + manifest, runtime load, fidelity gates.

The quantizers arrive with the engines issue; this package is the import root they live under.
"""
