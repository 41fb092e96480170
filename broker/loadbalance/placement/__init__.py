"""Placement strategies: where an unowned bundle goes."""
