"""Policies served by vlash. pi0.5 is the first (vlash.policies.pi05)."""
