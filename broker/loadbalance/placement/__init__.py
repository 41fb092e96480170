"""Placement strategies: where an unowned bundle goes (reference §1.7)."""
