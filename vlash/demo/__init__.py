"""`vlash demo`: the shipped policy served in a subprocess, the simulated arm driven through it over ZeroMQ,
a summary table and a plot. Robot side only in this process (no torch here)."""
