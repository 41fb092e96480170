"""Shedding strategies: which bundles the leader unloads (reference §1.6)."""
