"""The cookie keeps a bookie from starting on directories that do not belong together."""

from __future__ import annotations

from pathlib import Path

import pytest

from minipulsar.bookie.cookie import InvalidCookieError, check_cookies, read_cookie, record_bookie_id
from minipulsar.bookie.journal.format import segment_file_name


def test_a_new_bookie_gets_one_cookie_in_every_directory(tmp_path: Path) -> None:
    journal, ledgers = tmp_path / "j", [tmp_path / "l1", tmp_path / "l2"]
    cookie = check_cookies([journal], ledgers)
    assert all(read_cookie(d) == cookie for d in [journal, *ledgers])
    assert check_cookies([journal], ledgers) == cookie  # a restart finds the same one


def test_the_bookie_id_is_recorded_once_known(tmp_path: Path) -> None:
    cookie = check_cookies([tmp_path / "j"], [tmp_path / "l"])
    updated = record_bookie_id(cookie, "127.0.0.1:3181")
    assert read_cookie(tmp_path / "l").bookieHost == "127.0.0.1:3181"
    assert check_cookies([tmp_path / "j"], [tmp_path / "l"]) == updated


def test_a_wiped_directory_is_refused(tmp_path: Path) -> None:
    check_cookies([tmp_path / "j"], [tmp_path / "l"])
    (tmp_path / "j" / "current" / segment_file_name(1)).write_bytes(b"")  # the bookie has run
    (tmp_path / "l" / "current" / "VERSION").unlink()
    with pytest.raises(InvalidCookieError, match="no cookie"):
        check_cookies([tmp_path / "j"], [tmp_path / "l"])


def test_a_first_start_that_failed_while_writing_the_cookies_is_completed(tmp_path: Path) -> None:
    """A first start cut short after the first dir's cookie (a full disk on the second) left
    no data anywhere: the next start writes the missing cookies (it was refused for good, as
    if a directory had been wiped). Once any dir holds data, a missing cookie is refused."""
    journal, ledgers = tmp_path / "j", [tmp_path / "l1", tmp_path / "l2"]
    cookie = check_cookies([journal], ledgers)
    (ledgers[1] / "current" / "VERSION").unlink()
    assert check_cookies([journal], ledgers) == cookie
    assert read_cookie(ledgers[1]) == cookie
    (ledgers[1] / "current" / "VERSION").unlink()
    (ledgers[0] / "current" / "index.db").write_bytes(b"")
    with pytest.raises(InvalidCookieError, match="no cookie"):
        check_cookies([journal], ledgers)


def test_a_changed_set_of_directories_is_refused(tmp_path: Path) -> None:
    check_cookies([tmp_path / "j"], [tmp_path / "l"])
    with pytest.raises(InvalidCookieError):
        check_cookies([tmp_path / "j"], [tmp_path / "l", tmp_path / "l2"])


@pytest.mark.parametrize("reordered", ["ledger", "journal"])
def test_the_same_directories_in_another_order_are_refused(tmp_path: Path, reordered: str) -> None:
    """A ledger lives in dir ``ledger_id mod n`` and each journal's mark is kept by position:
    reordered lists hid acknowledged ledgers, or replayed a journal from another's mark."""
    journals, ledgers = [tmp_path / "j1", tmp_path / "j2"], [tmp_path / "l1", tmp_path / "l2"]
    check_cookies(journals, ledgers)
    if reordered == "ledger":
        ledgers = ledgers[::-1]
    else:
        journals = journals[::-1]
    with pytest.raises(InvalidCookieError, match="same dirs in another order"):
        check_cookies(journals, ledgers)


def test_directories_of_two_bookies_are_refused(tmp_path: Path) -> None:
    check_cookies([tmp_path / "j1"], [tmp_path / "l1"])
    check_cookies([tmp_path / "j2"], [tmp_path / "l2"])
    with pytest.raises(InvalidCookieError):
        check_cookies([tmp_path / "j1"], [tmp_path / "l2"])


def test_journal_data_without_a_cookie_is_refused(tmp_path: Path) -> None:
    current = tmp_path / "j" / "current"
    current.mkdir(parents=True)
    (current / "0000000000000001.txn").write_bytes(b"x")
    with pytest.raises(InvalidCookieError, match="journal segments"):
        check_cookies([tmp_path / "j"], [tmp_path / "l"])
