"""Goal: ZooKeeper metadata URLs parse as Pulsar and BookKeeper spell them, to the servers and
the chroot; anything else is a clear configuration error.

Method: parse each form and each kind of mistake."""

from __future__ import annotations

import pytest

from minipulsar.errors import ConfigError
from minipulsar.metadata.zk_url import ZooKeeperUrl, is_zookeeper_url, parse_zookeeper_url


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("zk:localhost:2181", ZooKeeperUrl((("localhost", 2181),), "")),
        ("zk:h1:2181,h2:2182/pulsar", ZooKeeperUrl((("h1", 2181), ("h2", 2182)), "/pulsar")),
        ("zk://h1:2181,h2:2182/a/b/", ZooKeeperUrl((("h1", 2181), ("h2", 2182)), "/a/b")),
        ("zk:h1", ZooKeeperUrl((("h1", 2181),), "")),
        ("zk+hierarchical://h1:2181;h2:2181/ledgers", ZooKeeperUrl((("h1", 2181), ("h2", 2181)), "")),
        ("zk+null://h1:2181/pulsar1/ledgers", ZooKeeperUrl((("h1", 2181),), "/pulsar1")),
        ("zk+flat://h1:2181,h2:2181/ledgers", ZooKeeperUrl((("h1", 2181), ("h2", 2181)), "")),
    ],
)
def test_forms_parse_to_servers_and_chroot(url: str, expected: ZooKeeperUrl) -> None:
    assert is_zookeeper_url(url)
    assert parse_zookeeper_url(url) == expected


def test_connect_string_is_zookeepers() -> None:
    assert parse_zookeeper_url("zk+hierarchical://a:1;b:2/ledgers").connect_string == "a:1,b:2"


@pytest.mark.parametrize(
    "url",
    [
        "zk:",
        "zk:host:notaport",
        "zk:host:0",
        "zk:h1:2181,,h2:2181",
        "zk:h1:2181//x",
        "zk+longhierarchical://h1:2181/ledgers",
        "zk+hierarchical://h1:2181/elsewhere",
        "zk+hierarchical://h1:2181",
        "zk+hierarchical:h1:2181/ledgers",
        "metastore://h1:6680",
    ],
)
def test_mistakes_are_config_errors(url: str) -> None:
    with pytest.raises(ConfigError):
        parse_zookeeper_url(url)
