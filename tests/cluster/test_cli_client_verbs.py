"""``minipulsar produce`` / ``consume``: pulsar-client's flags, its message rendering, and
one-line errors (exit code 1, no traceback) for bad input and an unreachable broker."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from minipulsar.cli.client_verbs import UsageError, format_message, hexdump, message_bodies, parse_properties
from minipulsar.cli.main import build_parser
from tests.support.cli import run_cli
from tests.support.client_fakes import make_message
from tests.support.net import unused_port


def test_produce_and_consume_take_pulsar_clients_flags() -> None:
    parser = build_parser()
    produce = parser.parse_args(
        [
            "produce",
            "t",
            "-m",
            "a,b",
            "-m",
            "c",
            "-f",
            "x.bin",
            "-n",
            "3",
            "-r",
            "50",
            "-k",
            "key",
            "-p",
            "a=1,b=2",
            "-p",
            "c=3",
            "-db",
            "--url",
            "pulsar://h:1",
        ]
    )
    assert (
        produce.messages,
        produce.files,
        produce.num_produce,
        produce.rate,
        produce.key,
        produce.properties,
        produce.disable_batching,
        produce.service_url,
    ) == (["a,b", "c"], ["x.bin"], 3, 50.0, "key", ["a=1,b=2", "c=3"], True, "pulsar://h:1")
    consume = parser.parse_args(
        [
            "consume",
            "t",
            "-s",
            "sub",
            "-t",
            "Key_Shared",
            "-p",
            "Latest",
            "-n",
            "0",
            "-r",
            "10",
            "--hex",
            "--regex",
            "-q",
            "5",
            "-m",
            "NonDurable",
        ]
    )
    assert (
        consume.subscription_name,
        consume.subscription_type,
        consume.subscription_position,
        consume.num_messages,
        consume.rate,
        consume.hex,
        consume.regex,
        consume.queue_size,
        consume.subscription_mode,
    ) == ("sub", "Key_Shared", "Latest", 0, 10.0, True, True, 5, "NonDurable")


def test_messages_split_on_the_separator_and_files_are_one_message_each(tmp_path: Path) -> None:
    (tmp_path / "blob").write_bytes(b"\x00\x01binary,with comma")
    assert message_bodies(["a,b", "c"], ",", [str(tmp_path / "blob")]) == [
        b"a",
        b"b",
        b"c",
        b"\x00\x01binary,with comma",
    ]
    assert message_bodies(["a;b,c"], ";", []) == [b"a", b"b,c"]
    with pytest.raises(UsageError, match="-m TEXT or -f FILE"):
        message_bodies([], ",", [])
    with pytest.raises(UsageError, match="cannot read"):
        message_bodies([], ",", [str(tmp_path / "missing")])


def test_properties_are_key_value_pairs_repeated_or_comma_separated() -> None:
    assert parse_properties(["a=1,b=2", "c=x=y", "d="]) == {"a": "1", "b": "2", "c": "x=y", "d": ""}
    with pytest.raises(UsageError, match="key=value"):
        parse_properties(["novalue"])


def test_a_message_prints_as_pulsar_client_prints_it() -> None:
    message = make_message(
        "persistent://public/default/t", 1, 2, data=b"hello", key="k1", properties={"a": "1", "b": "2"}
    )
    assert format_message(message) == "----- got message -----\nkey:[k1], properties:[a=1, b=2], content:hello"
    assert format_message(message, hide_content=True) == "----- got message -----\nkey:[k1], properties:[a=1, b=2]"
    assert format_message(message, hex_dump=True).endswith(
        "content:\n00000000  68 65 6c 6c 6f                                   |hello|"
    )


def test_hexdump_has_sixteen_bytes_a_line() -> None:
    lines = hexdump(bytes(range(20))).splitlines()
    assert lines[0].startswith("00000000  00 01 02") and lines[0].endswith("|................|")
    assert lines[1].startswith("00000010  10 11 12 13 ")


def assert_one_line_error(result: subprocess.CompletedProcess, *words: str) -> None:
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.mark.parametrize("verb", [["produce", "-m", "x"], ["consume", "-s", "sub"]])
def test_a_bad_topic_name_is_one_line_and_exit_code_1(verb: list[str]) -> None:
    result = run_cli(verb[0], "bogus://a/b/c", *verb[1:], "--url", "pulsar://127.0.0.1:1")
    assert_one_line_error(result, "bogus")


def test_produce_without_messages_says_how_to_give_them() -> None:
    assert_one_line_error(run_cli("produce", "t", "--url", "pulsar://127.0.0.1:1"), "-m TEXT or -f FILE")


@pytest.mark.parametrize("verb", [["produce", "-m", "x"], ["consume", "-s", "sub"]])
def test_an_unreachable_broker_is_one_line_and_exit_code_1(verb: list[str]) -> None:
    """Nothing listens on the port: the lookup gives up after --operation-timeout and the
    command says why in one line."""
    result = run_cli(
        verb[0], "t", *verb[1:], "--url", f"pulsar://127.0.0.1:{unused_port()}", "--operation-timeout", "1"
    )
    assert_one_line_error(result, "127.0.0.1")
