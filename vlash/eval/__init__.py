"""Simulation evaluation of real-time chunk execution: modes x inference delays, with the metrics of
ALGORITHMS.md §5 (success, completion time, reaction latency, jerk, boundary jumps)."""
