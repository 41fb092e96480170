"""Goal: Pulsar-style ``key=value`` files load into typed configs: comments and blank lines
skipped, unknown keys warned about by name, bad values refused naming key and accepted
values, CLI overrides applied last, cross-field rules (E >= Qw >= Qa) enforced."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import pytest

from minipulsar.config import (
    BookieConfig,
    BrokerConfig,
    MetastoreConfig,
    config_keys,
    load_config,
    parse_config_text,
    setting,
)
from minipulsar.errors import ConfigError


@dataclass(frozen=True, slots=True, kw_only=True)
class SampleConfig:
    strategy: str = setting(
        "loadBalancerLoadSheddingStrategy",
        "ThresholdShedder",
        choices=("ThresholdShedder", "OverloadShedder", "UniformLoadShedder"),
    )
    ratio: float = setting("loadBalancerBrokerThresholdShedderPercentage", 10.0, min_value=0, max_value=100)
    enabled: bool = setting("loadBalancerEnabled", True)
    dirs: tuple[str, ...] = setting("ledgerDirectories", ("a",))
    name: str | None = setting("advertisedAddress", None)


def write_conf(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "test.conf"
    path.write_text(text)
    return path


def test_parse_skips_comments_and_blank_lines_and_trims_spaces() -> None:
    text = "# a comment\n\n   \n  # indented comment\nbrokerServicePort = 6651 \n\twebServicePort=8081\n"
    assert parse_config_text(text) == {"brokerServicePort": "6651", "webServicePort": "8081"}


def test_parse_keeps_equals_signs_and_empty_values() -> None:
    text = "metadataStoreUrl=metastore://h:1/?a=b\nadvertisedAddress=\n"
    assert parse_config_text(text) == {"metadataStoreUrl": "metastore://h:1/?a=b", "advertisedAddress": ""}


def test_parse_last_duplicate_wins() -> None:
    assert parse_config_text("a=1\na=2\n") == {"a": "2"}


@pytest.mark.parametrize("line", ["brokerServicePort 6650", "=6650", "  = x"])
def test_parse_rejects_a_line_without_key_and_equals(line: str) -> None:
    with pytest.raises(ConfigError, match=r"broker.conf:2: expected key=value"):
        parse_config_text(f"# header\n{line}\n", "broker.conf")


def test_load_reads_a_file_into_typed_fields(tmp_path: Path) -> None:
    path = write_conf(
        tmp_path,
        "brokerServicePort=6651\nmanagedLedgerDefaultEnsembleSize=3\n"
        "managedLedgerDefaultWriteQuorum=3\nmanagedLedgerDefaultAckQuorum=2\n"
        "advertisedAddress=\n",
    )
    config = load_config(BrokerConfig, path)
    assert (config.port, config.ensemble_size, config.write_quorum, config.ack_quorum) == (6651, 3, 3, 2)
    assert config.advertised_address is None


def test_load_parses_lists_and_bools(tmp_path: Path) -> None:
    path = write_conf(tmp_path, "ledgerDirectories=/d1, /d2 ,/d3\njournalSyncData=false\n")
    config = load_config(BookieConfig, path)
    assert config.ledger_dirs == ("/d1", "/d2", "/d3")
    assert config.journal_sync_data is False


@pytest.mark.parametrize(
    "text, expected",
    [("true", True), ("TRUE", True), ("yes", True), ("1", True), ("false", False), ("off", False), ("0", False)],
)
def test_bool_spellings(text: str, expected: bool) -> None:
    assert load_config(SampleConfig, overrides={"loadBalancerEnabled": text}).enabled is expected


def test_unknown_key_is_a_warning_naming_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write_conf(tmp_path, "brokerDeleteInactiveTopicsEnabled=true\nbrokerServicePort=6652\n")
    with caplog.at_level(logging.WARNING, logger="minipulsar.config"):
        config = load_config(BrokerConfig, path)
    assert config.port == 6652
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "brokerDeleteInactiveTopicsEnabled" in warnings[0].getMessage()


@pytest.mark.parametrize(
    "key, value, accepted",
    [
        ("loadBalancerEnabled", "maybe", "true or false"),
        ("loadBalancerBrokerThresholdShedderPercentage", "lots", "a number"),
        ("loadBalancerLoadSheddingStrategy", "RandomShedder", "ThresholdShedder, OverloadShedder, UniformLoadShedder"),
        ("loadBalancerBrokerThresholdShedderPercentage", "150", "<= 100"),
        ("loadBalancerBrokerThresholdShedderPercentage", "-1", ">= 0"),
    ],
)
def test_bad_value_names_the_key_and_accepted_values(key: str, value: str, accepted: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(SampleConfig, overrides={key: value})
    assert key in str(caught.value) and value in str(caught.value) and accepted in str(caught.value)


@pytest.mark.parametrize(
    "text, key, accepted",
    [
        ("brokerServicePort=abc", "brokerServicePort", "an integer"),
        ("brokerServicePort=70000", "brokerServicePort", "<= 65535"),
        ("keepAliveIntervalSeconds=1.5", "keepAliveIntervalSeconds", "an integer"),
        ("journalSyncData=sometimes", "journalSyncData", "true or false"),
    ],
)
def test_bad_value_in_a_file_names_the_key(tmp_path: Path, text: str, key: str, accepted: str) -> None:
    cls = BookieConfig if key.startswith("journal") else BrokerConfig
    with pytest.raises(ConfigError) as caught:
        load_config(cls, write_conf(tmp_path, text + "\n"))
    assert key in str(caught.value) and accepted in str(caught.value)


def test_cli_overrides_win_over_the_file(tmp_path: Path) -> None:
    path = write_conf(tmp_path, "brokerServicePort=6651\nwebServicePort=8081\n")
    config = load_config(BrokerConfig, path, {"brokerServicePort": 0, "webServicePort": None})
    assert config.port == 0  # the flag wins
    assert config.http_port == 8081  # a flag not given (None) leaves the file's value


def test_overrides_are_checked_like_the_file() -> None:
    with pytest.raises(ConfigError, match="brokerServicePort"):
        load_config(BrokerConfig, overrides={"brokerServicePort": "nope"})
    with pytest.raises(ConfigError, match="brokerServicePort"):
        load_config(BrokerConfig, overrides={"brokerServicePort": True})


@pytest.mark.parametrize("e, qw, qa", [(1, 2, 1), (2, 2, 3), (3, 1, 2)])
def test_broker_ensemble_must_cover_write_and_ack_quorum(e: int, qw: int, qa: int) -> None:
    with pytest.raises(ConfigError, match="managedLedgerDefaultEnsembleSize >= managedLedgerDefaultWriteQuorum"):
        load_config(
            BrokerConfig,
            overrides={
                "managedLedgerDefaultEnsembleSize": e,
                "managedLedgerDefaultWriteQuorum": qw,
                "managedLedgerDefaultAckQuorum": qa,
            },
        )


@pytest.mark.parametrize("e, qw, qa", [(1, 1, 1), (3, 2, 2), (3, 3, 2), (5, 3, 1)])
def test_broker_valid_quorums_load(e: int, qw: int, qa: int) -> None:
    config = load_config(
        BrokerConfig,
        overrides={
            "managedLedgerDefaultEnsembleSize": str(e),
            "managedLedgerDefaultWriteQuorum": str(qw),
            "managedLedgerDefaultAckQuorum": str(qa),
        },
    )
    assert (config.ensemble_size, config.write_quorum, config.ack_quorum) == (e, qw, qa)


@pytest.mark.parametrize("value", ["inf", "nan", "-inf"])
def test_a_number_that_is_not_finite_is_refused(value: str) -> None:
    """inf and nan pass every range check (journalMaxGroupWaitMSec=inf killed the journal's
    writer thread; nan made it spin), so they are refused where numbers are read."""
    with pytest.raises(ConfigError, match="journalMaxGroupWaitMSec") as caught:
        load_config(BookieConfig, overrides={"journalMaxGroupWaitMSec": value})
    assert "a number" in str(caught.value)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            {"diskUsageThreshold": "0", "diskUsageWarnThreshold": "0", "diskUsageLwmThreshold": "0"},
            "diskUsageThreshold (0.0) must be above 0 and below 1",
        ),
        ({"diskUsageThreshold": "1"}, "diskUsageThreshold (1.0) must be above 0 and below 1"),
        (
            {"diskUsageThreshold": "0.9", "diskUsageWarnThreshold": "0.95", "diskUsageLwmThreshold": "0.8"},
            "diskUsageWarnThreshold (0.95) must not exceed diskUsageThreshold (0.9)",
        ),
    ],
)
def test_bookie_disk_thresholds_are_checked_as_bookkeeper_does(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(BookieConfig, overrides=overrides)
    assert message in str(caught.value)


@pytest.mark.parametrize("journal, ledgers", [("/data/bk", "/data/bk"), ("/data/j", "/data/l,/data/l/")])
def test_a_bookie_directory_named_twice_is_refused(journal: str, ledgers: str) -> None:
    with pytest.raises(ConfigError, match="named twice"):
        load_config(BookieConfig, overrides={"journalDirectories": journal, "ledgerDirectories": ledgers})


def test_metastore_session_timeout_bounds_are_checked() -> None:
    with pytest.raises(ConfigError, match="minSessionTimeout"):
        load_config(MetastoreConfig, overrides={"minSessionTimeout": "5000", "maxSessionTimeout": "2000"})


def test_unreadable_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(BrokerConfig, tmp_path / "missing.conf")


def test_defaults_load_without_a_file() -> None:
    for cls in (MetastoreConfig, BookieConfig, BrokerConfig):
        assert load_config(cls) == cls()
    keys = config_keys(BrokerConfig)
    assert keys["brokerServicePort"] == 6650 and keys["managedLedgerDefaultAckQuorum"] == 2


def test_binary_file_is_a_config_error(tmp_path: Path) -> None:
    """Regression: a non-UTF-8 file escaped as UnicodeDecodeError with a traceback."""
    path = tmp_path / "broker.conf"
    path.write_bytes(b"brokerServicePort=6650\n\xff\xfe\x00garbage\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(BrokerConfig, path)
