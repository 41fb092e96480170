"""Shedding strategies: which bundles the leader unloads."""
