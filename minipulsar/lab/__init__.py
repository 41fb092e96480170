"""The tuning lab."""
