"""Goal: Pulsar-style ``key=value`` files load into typed configs: comments and blank lines
skipped, empty values left at the default, deprecated upstream spellings read as their key,
unknown keys warned about by name, bad values refused naming key and accepted values, CLI
overrides applied last, cross-field rules (E >= Qw >= Qa) enforced."""

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
    config_settings,
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
    """A non-UTF-8 file is a ConfigError naming the file, not a UnicodeDecodeError traceback."""
    path = tmp_path / "broker.conf"
    path.write_bytes(b"brokerServicePort=6650\n\xff\xfe\x00garbage\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(BrokerConfig, path)


def test_an_empty_value_leaves_the_key_at_its_default(tmp_path: Path) -> None:
    """Pulsar's shipped files hold many ``key=`` lines, which its loader skips."""
    path = write_conf(
        tmp_path,
        "clusterName=\nmaxMessagePublishBufferSizeInMB=\nmanagedLedgerCacheSizeMB=\n"
        "supportedNamespaceBundleSplitAlgorithms=\nmetadataStoreUrl= \n",
    )
    assert load_config(BrokerConfig, path) == BrokerConfig()


def test_an_empty_override_leaves_the_files_value(tmp_path: Path) -> None:
    path = write_conf(tmp_path, "clusterName=east\n")
    assert load_config(BrokerConfig, path, {"clusterName": ""}).cluster_name == "east"


def test_an_empty_value_unsets_a_key_that_may_be_unset(tmp_path: Path) -> None:
    path = write_conf(tmp_path, "advertisedAddress=broker-1.example\n")
    assert load_config(BrokerConfig, path, {"advertisedAddress": ""}).advertised_address is None


@pytest.mark.parametrize(
    "cls, alias, value, attribute, expected",
    [
        (BookieConfig, "journalDirectory", "/j", "journal_dirs", ("/j",)),
        (BookieConfig, "compactionRate", "500", "compaction_rate_by_entries", 500),
        (BrokerConfig, "zooKeeperSessionTimeoutMillis", "5000", "session_timeout_ms", 5000),
        (
            BrokerConfig,
            "loadBalancerBandwithInResourceWeight",
            "0.5",
            "load_balancer_bandwidth_in_resource_weight",
            0.5,
        ),
        (
            BrokerConfig,
            "loadBalancerBandwithOutResourceWeight",
            "0.5",
            "load_balancer_bandwidth_out_resource_weight",
            0.5,
        ),
    ],
)
def test_a_deprecated_upstream_spelling_is_read_as_its_key(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    cls: type,
    alias: str,
    value: str,
    attribute: str,
    expected: object,
) -> None:
    with caplog.at_level(logging.INFO, logger="minipulsar.config"):
        config = load_config(cls, write_conf(tmp_path, f"{alias}={value}\n"))
    assert getattr(config, attribute) == expected
    assert [r.levelno for r in caplog.records] == [logging.INFO]  # said once, not warned about


def test_an_alias_placeholder_leaves_the_key_as_it_is(tmp_path: Path) -> None:
    """Pulsar's broker.conf ships ``zooKeeperSessionTimeoutMillis=-1`` beside the real key."""
    path = write_conf(tmp_path, "zooKeeperSessionTimeoutMillis=-1\nmetadataStoreSessionTimeoutMillis=20000\n")
    assert load_config(BrokerConfig, path).session_timeout_ms == 20000
    assert (
        load_config(BrokerConfig, write_conf(tmp_path, "zooKeeperSessionTimeoutMillis=-1\n")).session_timeout_ms
        == 30000
    )


def test_a_key_and_its_alias_with_different_values_are_refused(tmp_path: Path) -> None:
    path = write_conf(tmp_path, "journalDirectory=/a\njournalDirectories=/b\n")
    with pytest.raises(ConfigError) as caught:
        load_config(BookieConfig, path)
    message = str(caught.value)
    assert str(path) in message and "journalDirectory=/a" in message and "journalDirectories=/b" in message


def test_a_key_and_its_alias_with_one_value_load(tmp_path: Path) -> None:
    """Pulsar's bookkeeper.conf ships both ``compactionRate=1000`` and ``compactionRateByEntries=1000``."""
    path = write_conf(
        tmp_path, "compactionRate=700\ncompactionRateByEntries=700\njournalDirectory=/j\njournalDirectories=/j\n"
    )
    config = load_config(BookieConfig, path)
    assert (config.compaction_rate_by_entries, config.journal_dirs) == (700, ("/j",))


def test_the_command_line_overrides_a_files_alias(tmp_path: Path) -> None:
    path = write_conf(tmp_path, "journalDirectory=/a\n")
    assert load_config(BookieConfig, path, {"journalDirectories": "/b"}).journal_dirs == ("/b",)
    with pytest.raises(ConfigError, match="the command line"):
        load_config(BookieConfig, path, {"journalDirectories": "/b", "journalDirectory": "/c"})


def test_the_shapes_of_pulsars_shipped_files_load(tmp_path: Path) -> None:
    """Goal: lines as Pulsar 4.0's conf/broker.conf and conf/bookkeeper.conf ship them load,
    to minipulsar's defaults where they name them."""
    broker = write_conf(
        tmp_path,
        "metadataStoreUrl=\nclusterName=\nadvertisedAddress=\nmaxMessagePublishBufferSizeInMB=\n"
        "metadataStoreSessionTimeoutMillis=30000\nzookeeperServers=\nzooKeeperSessionTimeoutMillis=-1\n"
        "loadBalancerBandwidthInResourceWeight=1.0\nmanagedLedgerCacheSizeMB=\n",
    )
    assert load_config(BrokerConfig, broker) == BrokerConfig()
    bookie = write_conf(
        tmp_path,
        "journalDirectory=data/bookkeeper/journal\nledgerDirectories=data/bookkeeper/ledgers\n"
        "dbStorage_writeCacheMaxSizeMb=\ndbStorage_readAheadCacheMaxSizeMb=\nadvertisedAddress=\n"
        "compactionRate=1000\ncompactionRateByEntries=1000\nmetadataServiceUri=\n",
    )
    assert load_config(BookieConfig, bookie) == BookieConfig()


@pytest.mark.parametrize("cls", [MetastoreConfig, BookieConfig, BrokerConfig])
def test_every_key_says_in_one_line_what_it_means(cls: type) -> None:
    """Goal: the conf files can print, above each key, one line of meaning and, where the
    default is not upstream's, one line saying whose it is."""
    for _, s in config_settings(cls):
        for text in [s.doc] if s.upstream is None else [s.doc, s.upstream]:
            assert text and "\n" not in text and len(text) <= 100 and text.endswith("."), (s.key, text)
