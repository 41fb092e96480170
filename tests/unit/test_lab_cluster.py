"""The lab cluster's broker settings: each broker's random draws seeded apart, its own keys last."""

from __future__ import annotations

from minipulsar.config import load_config
from minipulsar.config.broker import BrokerConfig
from minipulsar.lab.cluster import broker_settings


def test_each_broker_gets_its_own_seed_from_the_runs_seed() -> None:
    seeds = [broker_settings(i, (2, 2, 2), 7, {})["minipulsarRandomSeed"] for i in range(3)]
    assert seeds == [7000, 7001, 7002]


def test_an_unseeded_run_leaves_the_brokers_unseeded() -> None:
    assert "minipulsarRandomSeed" not in broker_settings(0, (2, 2, 2), None, {})


def test_a_brokers_own_settings_win_over_the_labs() -> None:
    settings = broker_settings(1, (3, 2, 2), 7, {"minipulsarRandomSeed": 1, "managedLedgerDefaultAckQuorum": 1})
    assert settings["minipulsarRandomSeed"] == 1
    assert settings["managedLedgerDefaultAckQuorum"] == 1
    assert settings["managedLedgerDefaultEnsembleSize"] == 3


def test_the_seed_key_loads_into_the_broker_config() -> None:
    assert load_config(BrokerConfig, overrides={"minipulsarRandomSeed": "7001"}).random_seed == 7001
    assert load_config(BrokerConfig).random_seed is None
