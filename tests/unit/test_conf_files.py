"""Goal: the shipped ``conf/*.conf`` list every key each server reads with its default, as
generated from minipulsar/config/, and load back to exactly those defaults.

Method: compare each file with :func:`conf_text`; load it; check the keys, and that a default
differing from upstream's says so above the key."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from minipulsar.config import CONF_FILES, ConfFile, conf_file, conf_text, config_keys, load_config, parse_config_text

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("conf", CONF_FILES, ids=lambda conf: conf.name)
def test_the_shipped_file_is_the_generated_text(conf: ConfFile) -> None:
    shipped = (ROOT / "conf" / conf.name).read_text(encoding="utf-8")
    assert shipped == conf_text(conf), f"conf/{conf.name} is out of date: run `minipulsar config write conf`"


@pytest.mark.parametrize("conf", CONF_FILES, ids=lambda conf: conf.name)
def test_the_file_lists_every_key_once(conf: ConfFile) -> None:
    text = conf_text(conf)
    keys = [line.partition("=")[0] for line in text.splitlines() if line and not line.startswith("#")]
    assert keys == list(config_keys(conf.config))
    assert parse_config_text(text).keys() == config_keys(conf.config).keys()


@pytest.mark.parametrize("conf", CONF_FILES, ids=lambda conf: conf.name)
def test_the_file_loads_to_the_defaults_without_a_warning(
    conf: ConfFile, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / conf.name
    path.write_text(conf_text(conf), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="minipulsar.config"):
        assert load_config(conf.config, path) == conf.config()
    assert not caplog.records


@pytest.mark.parametrize(
    "role, key, note",
    [
        ("broker", "loadBalancerMemoryResourceWeight", "# Pulsar's default: 0 (since 4.0)."),
        ("broker", "loadBalancerDirectMemoryResourceWeight", "# Pulsar's default: 0 (since 3.2)."),
        ("broker", "bindAddress", "# Pulsar's default: 0.0.0.0 (every interface)."),
        ("broker", "maxMessageSize", "# Pulsar's frames may be 10 KiB larger than maxMessageSize."),
        ("bookie", "nettyMaxFrameSizeBytes", "# BookKeeper's default: 5242880; Pulsar's bookkeeper.conf: 5253120"),
        ("bookie", "journalDirectories", "# Also read as: journalDirectory."),
    ],
)
def test_a_default_not_upstreams_says_so_above_its_key(role: str, key: str, note: str) -> None:
    lines = conf_text(conf_file(role)).splitlines()
    start = end = next(i for i, line in enumerate(lines) if line.startswith(f"{key}="))
    while lines[start - 1].startswith("#"):
        start -= 1
    comments = lines[start:end]
    assert any(line.startswith(note) for line in comments), comments
