"""Every scenario the lab has, by name, in the order ``minipulsar lab list`` shows them."""

from __future__ import annotations

import importlib

from minipulsar.lab.scenario import Scenario

SCENARIO_MODULES = (
    "bookie_load_aware",
    "quarantine_probabilistic",
    "shedder_threshold",
    "placement_lrruw",
    "dispatcher_precise_flow",
    "cache_readers",
    "cache_mark_delete",
    "hdd_reads_push_writes",
    "publish_throttling",
    "bundle_split",
)
"""Modules of :mod:`minipulsar.lab.scenarios`, each defining ``SCENARIO``."""


def scenarios() -> dict[str, Scenario]:
    """Name → scenario (imported on demand: listing them needs neither matplotlib nor a cluster)."""
    found = {}
    for module_name in SCENARIO_MODULES:
        module = importlib.import_module(f"minipulsar.lab.scenarios.{module_name}")
        scenario: Scenario = module.SCENARIO
        found[scenario.name] = scenario
    return found
