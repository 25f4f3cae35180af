"""Weight-only quantized pi0.5 at run time: the quantized Linear drop-ins, their packing, the manifest
(`quant.json`) and loading a quantized policy directory. The offline side (planning, quantizing, calibrating,
the fidelity gate) is vlash.quant, which builds on this package."""
