"""Simulation evaluation of real-time chunk execution: modes x inference delays, with the metrics of
docs/METHODS.md "Metrics" (success, completion time, reaction latency, jerk, boundary jumps)."""
