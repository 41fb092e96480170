"""The standalone launcher's pure parts: port and quorum choices, saved state, READY lines, argv."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from minipulsar.cli.standalone import (
    ChildOptions,
    banner,
    bookie_args,
    bookie_metadata_url,
    broker_args,
    metastore_args,
)
from minipulsar.cli.standalone_plan import (
    Quorum,
    StandaloneState,
    bookie_ports,
    load_state,
    make_plan,
    quorum_for,
    save_state,
)
from minipulsar.cli.supervisor import ReadyLine, describe_exit
from minipulsar.errors import ConfigError


@pytest.mark.parametrize("bookies, quorum", [(1, Quorum(1, 1, 1)), (2, Quorum(2, 2, 2)), (5, Quorum(2, 2, 2))])
def test_quorum_is_111_for_one_bookie_and_222_for_more(bookies: int, quorum: Quorum) -> None:
    assert quorum_for(bookies) == quorum


def test_bookie_ports_default_to_3181_plus_index() -> None:
    assert bookie_ports(3, None, {}) == [3181, 3182, 3183]


def test_saved_bookie_ports_win_over_the_default_and_over_port_zero() -> None:
    saved = {"bookie-0": 40001, "bookie-1": 40007}
    assert bookie_ports(3, None, saved) == [40001, 40007, 3183]
    assert bookie_ports(3, 0, saved) == [40001, 40007, 0]


def test_explicit_bookie_port_wins_over_saved_ports() -> None:
    assert bookie_ports(2, 5000, {"bookie-0": 40001}) == [5000, 5001]


def test_plan_puts_journals_and_ledgers_under_their_roots(tmp_path: Path) -> None:
    plan = make_plan(
        data_dir=tmp_path / "d", bookie_count=2, journal_root=tmp_path / "ssd", bookie_port=0, bookie_http_port=0
    )
    assert [b.journal_dir for b in plan.bookies] == [tmp_path / "ssd/bookie-0", tmp_path / "ssd/bookie-1"]
    assert [b.ledger_dir for b in plan.bookies] == [tmp_path / "d/ledgers/bookie-0", tmp_path / "d/ledgers/bookie-1"]
    assert plan.log_dir == tmp_path / "d/logs" and plan.state_path == tmp_path / "d/standalone.json"


def test_plan_bookie_http_ports_follow_the_base(tmp_path: Path) -> None:
    plan = make_plan(data_dir=tmp_path, bookie_count=3, bookie_http_port=9000)
    assert [b.http_port for b in plan.bookies] == [9000, 9001, 9002]


def test_plan_refuses_one_port_for_two_servers(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="port 6650 is given to both broker and bookie-0"):
        make_plan(data_dir=tmp_path, bookie_count=1, bookie_port=6650)


def test_plan_refuses_zero_bookies(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--bookies"):
        make_plan(data_dir=tmp_path, bookie_count=0)


def test_plan_advertises_loopback_when_binding_every_interface(tmp_path: Path) -> None:
    assert make_plan(data_dir=tmp_path, bookie_count=1, bind_address="0.0.0.0").advertised_address == "127.0.0.1"


def test_plan_keeps_the_saved_advertised_address(tmp_path: Path) -> None:
    state = StandaloneState("bk.example", {"bookie-0": 3181})
    assert make_plan(data_dir=tmp_path, bookie_count=1, state=state).advertised_address == "bk.example"


def test_state_round_trips_through_its_file(tmp_path: Path) -> None:
    path = tmp_path / "standalone.json"
    assert load_state(path) == StandaloneState()
    save_state(path, StandaloneState("127.0.0.1", {"bookie-0": 41234}))
    assert load_state(path) == StandaloneState("127.0.0.1", {"bookie-0": 41234})


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[]",
        '{"format": 1}',
        '{"format": 1, "bookie_ports": {"bookie-0": "x"}}',
        '{"format": 9, "bookie_ports": {}}',
    ],
)
def test_malformed_state_is_a_config_error_naming_the_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "standalone.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"standalone\.json"):
        load_state(path)


def test_ready_line_parses_address_and_http() -> None:
    assert ReadyLine.parse("READY broker 127.0.0.1:6650 http=127.0.0.1:8080\n") == ReadyLine(
        "broker", "127.0.0.1", 6650, ("127.0.0.1", 8080)
    )
    assert ReadyLine.parse("READY metastore 127.0.0.1:6680") == ReadyLine("metastore", "127.0.0.1", 6680)


@pytest.mark.parametrize("line", ["", "hello", "READY broker", "READY broker localhost", "READY broker h:x"])
def test_other_lines_are_not_ready_lines(line: str) -> None:
    assert ReadyLine.parse(line) is None


def test_exit_descriptions_name_the_signal() -> None:
    assert describe_exit(-9) == "killed by SIGKILL"
    assert describe_exit(3) == "exit code 3"


def test_broker_gets_the_quorum_unless_its_config_sets_it(tmp_path: Path) -> None:
    plan = make_plan(data_dir=tmp_path, bookie_count=2)
    argv = broker_args(plan, "metastore://127.0.0.1:6680", ChildOptions())
    assert "managedLedgerDefaultEnsembleSize=2" in argv and "managedLedgerDefaultAckQuorum=2" in argv
    opts = ChildOptions(broker_config="b.conf", broker_config_keys=frozenset({"managedLedgerDefaultAckQuorum"}))
    argv = broker_args(plan, "metastore://127.0.0.1:6680", opts)
    assert "managedLedgerDefaultAckQuorum=2" not in argv and argv[-2:] == ["--config", "b.conf"]


def test_child_command_lines_parse_with_the_real_cli(tmp_path: Path) -> None:
    """Goal: the launcher never builds a command line its children reject.
    Method: parse each child's argv with the `minipulsar` parser and read back the key values."""
    from minipulsar.cli.main import build_parser

    plan = make_plan(data_dir=tmp_path, bookie_count=2, bookie_port=4000, bookie_http_port=0)
    opts, url = ChildOptions(log_level="DEBUG"), "metastore://127.0.0.1:6680"
    parser = build_parser()
    metastore = parser.parse_args(["metastore", *metastore_args(plan, opts)])
    assert metastore.port == 6680 and metastore.http_port == 7000 and Path(metastore.data_dir) == plan.metastore_dir
    bookie = parser.parse_args(["bookie", *bookie_args(plan, plan.bookies[1], url, opts)])
    assert bookie.port == 4001 and bookie.metadata_url == url and bookie.log_level == "DEBUG"
    assert bookie.journal_dir == [str(plan.bookies[1].journal_dir)]
    assert bookie.ledger_dirs == str(plan.bookies[1].ledger_dir)
    broker = parser.parse_args(["broker", *broker_args(plan, url, opts)])
    assert broker.port == 6650 and broker.http_port == 8080 and broker.metadata_url == url
    assert bookie.advertised_address == broker.advertised_address == "127.0.0.1"


def test_a_broker_conf_key_left_empty_does_not_keep_the_launchers_quorum_out(tmp_path: Path) -> None:
    """Goal: only keys the broker.conf gives a value count as set by it (``key=`` leaves the
    default, so the launcher's quorum must still be passed)."""
    from minipulsar.cli.main import build_parser
    from minipulsar.cli.standalone import _child_options

    conf = tmp_path / "broker.conf"
    conf.write_text("managedLedgerDefaultEnsembleSize=3\nmanagedLedgerDefaultAckQuorum=\n")
    args = build_parser().parse_args(["standalone", "--broker-config", str(conf)])
    assert _child_options(args).broker_config_keys == {"managedLedgerDefaultEnsembleSize"}


# ---------------------------------------------------------------------------------------------
# --metadata-url: an external metadata store instead of the metastore child.

ZK_URL = "zk:127.0.0.1:2181"


def test_plan_with_an_external_store_runs_no_metastore_and_binds_no_metastore_port(tmp_path: Path) -> None:
    plan = make_plan(data_dir=tmp_path, bookie_count=1, metadata_url=ZK_URL)
    assert not plan.runs_metastore and plan.metadata_url == ZK_URL
    assert not [owner for owner, _ in plan.fixed_ports() if owner.startswith("metastore")]
    assert make_plan(data_dir=tmp_path, bookie_count=1).runs_metastore


@pytest.mark.parametrize(
    "url", ["memory://shared", "http://127.0.0.1:2181", "127.0.0.1:2181", "metastore://", "zk+null://h:2181/ledgers"]
)
def test_a_metadata_url_separate_processes_cannot_share_is_refused(tmp_path: Path, url: str) -> None:
    with pytest.raises(ConfigError, match=r"--metadata-url .*expected zk:host:port"):
        make_plan(data_dir=tmp_path, bookie_count=1, metadata_url=url)


@pytest.mark.parametrize("url", ["zk:", "zk:h:port", "zk:h:2181//x"])
def test_a_zookeeper_url_that_does_not_parse_is_refused_before_anything_starts(tmp_path: Path, url: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(repr(url))):
        make_plan(data_dir=tmp_path, bookie_count=1, metadata_url=url)


@pytest.mark.parametrize(
    "saved, asked",
    [(None, ZK_URL), (ZK_URL, None), (ZK_URL, "zk:127.0.0.1:2181/other"), ("metastore://h:6680", ZK_URL)],
)
def test_a_data_dir_whose_bookies_registered_in_another_store_is_refused(
    tmp_path: Path, saved: str | None, asked: str | None
) -> None:
    """Goal: bookies started on another store than their ledgers' would garbage-collect them."""
    state = StandaloneState("127.0.0.1", {"bookie-0": 3181}, saved)
    with pytest.raises(ConfigError, match=r"holds bookies registered in .*standalone\.json"):
        make_plan(data_dir=tmp_path, bookie_count=1, state=state, metadata_url=asked)


def test_the_same_store_again_or_a_fresh_data_dir_is_accepted(tmp_path: Path) -> None:
    state = StandaloneState("127.0.0.1", {"bookie-0": 3181}, ZK_URL)
    assert make_plan(data_dir=tmp_path, bookie_count=1, state=state, metadata_url=ZK_URL).metadata_url == ZK_URL
    fresh = StandaloneState("127.0.0.1", {}, None)
    assert make_plan(data_dir=tmp_path, bookie_count=1, state=fresh, metadata_url=ZK_URL).metadata_url == ZK_URL


def test_state_keeps_the_metadata_url_and_a_file_without_it_means_the_own_metastore(tmp_path: Path) -> None:
    path = tmp_path / "standalone.json"
    save_state(path, StandaloneState("127.0.0.1", {"bookie-0": 41234}, ZK_URL))
    assert load_state(path).metadata_url == ZK_URL
    path.write_text('{"format": 1, "advertised_address": "127.0.0.1", "bookie_ports": {"bookie-0": 41234}}')
    assert load_state(path) == StandaloneState("127.0.0.1", {"bookie-0": 41234}, None)


@pytest.mark.parametrize(
    "url, bookie_url",
    [
        ("zk:127.0.0.1:2181", "zk+hierarchical://127.0.0.1:2181/ledgers"),
        ("zk:h1:2181,h2:2182,h3:2183", "zk+hierarchical://h1:2181;h2:2182;h3:2183/ledgers"),
        ("zk://h1:2181,h2:2181/pulsar/one/", "zk+hierarchical://h1:2181;h2:2181/pulsar/one/ledgers"),
        ("zk:h1:2181/", "zk+hierarchical://h1:2181/ledgers"),
        ("zk:h1", "zk+hierarchical://h1:2181/ledgers"),
        ("metastore://127.0.0.1:6680", "metastore://127.0.0.1:6680"),
    ],
)
def test_bookies_get_bookkeepers_spelling_of_a_zookeeper_url(url: str, bookie_url: str) -> None:
    assert bookie_metadata_url(url) == bookie_url


def test_metastore_flags_with_an_external_store_are_refused() -> None:
    from minipulsar.cli.main import build_parser
    from minipulsar.cli.standalone import _check_metastore_flags

    parse = build_parser().parse_args
    _check_metastore_flags(parse(["standalone", "--metadata-url", ZK_URL]))
    _check_metastore_flags(parse(["standalone", "--metastore-port", "7000"]))
    with pytest.raises(ConfigError, match=r"--metastore-port and --metastore-config configure the metastore"):
        _check_metastore_flags(
            parse(["standalone", "--metadata-url", ZK_URL, "--metastore-port", "0", "--metastore-config", "m.conf"])
        )
    with pytest.raises(ConfigError, match=r"^--metastore-http-port configures the metastore"):
        _check_metastore_flags(parse(["standalone", "--metadata-url", ZK_URL, "--metastore-http-port", "0"]))


def test_banner_names_the_external_store(tmp_path: Path) -> None:
    plan = make_plan(data_dir=tmp_path, bookie_count=1, metadata_url=ZK_URL)
    assert f"running: metadata on {ZK_URL}, 1 bookie" in banner(plan, "pulsar://127.0.0.1:6650", None)
