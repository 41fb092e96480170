"""The lab's scenarios: one module per finding, each defining ``SCENARIO``."""
