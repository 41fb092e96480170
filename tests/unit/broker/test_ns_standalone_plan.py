"""Goal: ``standalone --brokers N`` plans N brokers on consecutive (or free) ports with their own
names and logs, refuses overlaps, and keeps the single-broker layout unchanged.
Method: the launcher's pure planning and argv functions, parsed back with the real CLI parser."""

from __future__ import annotations

from pathlib import Path

import pytest

from minipulsar.cli.main import build_parser
from minipulsar.cli.standalone import ChildOptions, banner, broker_args
from minipulsar.cli.standalone_plan import make_plan
from minipulsar.errors import ConfigError


def test_one_broker_keeps_its_name_and_ports(tmp_path: Path) -> None:
    plan = make_plan(data_dir=tmp_path, bookie_count=1)
    assert [(b.name, b.port, b.web_port) for b in plan.brokers] == [("broker", 6650, 8080)]


def test_brokers_take_consecutive_ports_and_numbered_names(tmp_path: Path) -> None:
    plan = make_plan(data_dir=tmp_path, bookie_count=1, broker_count=3)
    assert [(b.name, b.port, b.web_port) for b in plan.brokers] == [
        ("broker-0", 6650, 8080),
        ("broker-1", 6651, 8081),
        ("broker-2", 6652, 8082),
    ]
    assert ("broker-2 web service", 8082) in plan.fixed_ports()


def test_port_zero_means_any_port_for_every_broker(tmp_path: Path) -> None:
    plan = make_plan(data_dir=tmp_path, bookie_count=1, broker_count=2, broker_port=0, web_port=0)
    assert [(b.port, b.web_port) for b in plan.brokers] == [(0, 0), (0, 0)]


def test_overlapping_broker_ports_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="port 6651 is given to both broker-1 and bookie-0"):
        make_plan(data_dir=tmp_path, bookie_count=1, broker_count=2, bookie_port=6651)
    with pytest.raises(ConfigError, match="--brokers must be at least 1"):
        make_plan(data_dir=tmp_path, bookie_count=1, broker_count=0)


def test_each_broker_gets_its_own_ports_on_its_command_line(tmp_path: Path) -> None:
    plan = make_plan(data_dir=tmp_path, bookie_count=2, broker_count=2)
    parser = build_parser()
    parsed = [
        parser.parse_args(["broker", *broker_args(plan, "metastore://127.0.0.1:6680", ChildOptions(), slot)])
        for slot in plan.brokers
    ]
    assert [(p.port, p.http_port) for p in parsed] == [(6650, 8080), (6651, 8081)]
    assert broker_args(plan, "metastore://x:1", ChildOptions()) == broker_args(
        plan, "metastore://x:1", ChildOptions(), plan.brokers[0]
    )


def test_banner_names_every_broker(tmp_path: Path) -> None:
    plan = make_plan(data_dir=tmp_path, bookie_count=1, broker_count=3)
    text = banner(plan, "pulsar://127.0.0.1:6650", "http://127.0.0.1:8080", ["127.0.0.1:6651", "127.0.0.1:6652"])
    assert "3 brokers" in text and "pulsar://127.0.0.1:6650,127.0.0.1:6651,127.0.0.1:6652" in text
    single = banner(make_plan(data_dir=tmp_path, bookie_count=1), "pulsar://127.0.0.1:6650", None)
    assert "every broker" not in single and single.count("broker") >= 1
