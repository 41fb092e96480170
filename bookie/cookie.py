"""The bookie's cookie: one identity file (``current/VERSION``) in every journal and ledger dir.

BookKeeper writes a cookie into each of a bookie's directories so that a bookie never starts
on a mix of directories from different bookies or from an older layout, which would serve a
ledger with entries silently missing. The rules here:

- no cookie anywhere and no journal data: a new bookie; write a fresh cookie everywhere;
- the same cookie in some directories, none in the others, and no data anywhere (no journal
  segment, entry log or index): a first start that failed while writing the cookies (a
  full disk); the missing ones are written;
- every directory holds the same cookie (same instance id, same journal and ledger dirs *in
  the same order*: a ledger lives in dir ``ledger_id mod n`` and each journal's checkpoint
  mark is kept by its position, so a reordered list would hide acknowledged ledgers or replay
  a journal from another's mark): start;
- anything else (a dir without a cookie beside dirs with one, two instance ids, a changed or
  reordered list of journal or ledger dirs) refuses to start with :class:`InvalidCookieError`.

The bookie id (host:port) is recorded once the port is bound (:func:`record_bookie_id`).
The cookie is also kept in the metadata store under ``/ledgers/cookies/{bookie id}``, as
BookKeeper keeps it in ZooKeeper (:func:`check_store_cookie`): a bookie whose directories were
all wiped (new disks, another data dir) gets a new instance id, and must not come back under
the id brokers know with none of the ledgers they placed there — ledger recovery would read
its "no such ledger" as "no entries". It is refused until an operator deletes that key.
With ``--port 0`` the id changes on each start and each start leaves its own key; a port the
OS hands out whose id holds another instance's cookie is exchanged for another
(:class:`bookie.bookie_server.BookieServer`), since an ephemeral port is no identity.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from minipulsar.bookie.journal.directory import list_segments
from minipulsar.bookie.storage.entry_logger import list_entry_logs
from minipulsar.bookie.storage.index_db import INDEX_DB_FILE
from minipulsar.durable_file import make_dirs, write_atomically
from minipulsar.errors import AlreadyExistsError, BadVersionError, MiniPulsarError
from minipulsar.ledger_paths import cookie_path
from minipulsar.metadata import NOT_EXISTS, MetadataStore

log = logging.getLogger(__name__)

COOKIE_FILE = "VERSION"
LAYOUT_VERSION = 1


class InvalidCookieError(MiniPulsarError):
    """The directories do not belong together (see the module docstring)."""


class ForeignStoreCookieError(InvalidCookieError):
    """The metadata store holds another bookie instance's cookie for this bookie id."""


@dataclass(frozen=True, slots=True)
class Cookie:
    layoutVersion: int
    instanceId: str
    bookieHost: str
    journalDirs: list[str]
    ledgerDirs: list[str]

    def same_bookie(self, other: Cookie) -> bool:
        """Same instance and the same dirs in the same order (as BookKeeper's cookie compares them)."""
        return (self.layoutVersion, self.instanceId, list(self.journalDirs), list(self.ledgerDirs)) == (
            other.layoutVersion,
            other.instanceId,
            list(other.journalDirs),
            list(other.ledgerDirs),
        )


def _cookie_path(directory: Path) -> Path:
    return directory / "current" / COOKIE_FILE


def read_cookie(directory: Path) -> Cookie | None:
    path = _cookie_path(directory)
    try:
        return Cookie(**json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError) as exc:
        raise InvalidCookieError(f"{path} is not a valid cookie: {exc}") from exc


def write_cookie(directory: Path, cookie: Cookie) -> None:
    """Atomically (write, fsync, rename, fsync the dir)."""
    make_dirs(directory / "current")
    write_atomically(_cookie_path(directory), json.dumps(asdict(cookie)).encode())


def check_cookies(journal_dirs: list[Path], ledger_dirs: list[Path]) -> Cookie:
    """Verify (or, for a new bookie, write) the cookie of every directory. Blocking.

    Raises:
        InvalidCookieError: the directories do not form one bookie.
    """
    journal_dirs = [Path(d).resolve() for d in journal_dirs]
    ledger_dirs = [Path(d).resolve() for d in ledger_dirs]
    all_dirs = journal_dirs + ledger_dirs
    expected = Cookie(LAYOUT_VERSION, "", "", [str(d) for d in journal_dirs], [str(d) for d in ledger_dirs])
    found = {d: read_cookie(d) for d in all_dirs}
    present = {d: c for d, c in found.items() if c is not None}
    if not present:
        _check_no_data(journal_dirs)
        cookie = replace(expected, instanceId=uuid.uuid4().hex)
        for directory in all_dirs:
            write_cookie(directory, cookie)
        log.info("new bookie instance %s", cookie.instanceId)
        return cookie
    reference_dir, reference = next(iter(present.items()))
    missing = [d for d, c in found.items() if c is None]
    if (
        missing
        and all(c.same_bookie(replace(expected, instanceId=reference.instanceId)) for c in present.values())
        and not _holds_data(journal_dirs, ledger_dirs)
    ):
        log.warning(
            "no cookie in %s, but no directory holds any data yet: completing a first start that failed half-way",
            ", ".join(map(str, missing)),
        )
        for directory in missing:
            write_cookie(directory, reference)
        return reference
    for directory, dir_cookie in found.items():
        if dir_cookie is None:
            raise InvalidCookieError(
                f"{directory} has no cookie but {reference_dir} has one: directories were added or wiped"
            )
        if not dir_cookie.same_bookie(replace(expected, instanceId=reference.instanceId)):
            reordered = sorted(dir_cookie.journalDirs) == sorted(expected.journalDirs) and sorted(
                dir_cookie.ledgerDirs
            ) == sorted(expected.ledgerDirs)
            raise InvalidCookieError(
                f"the cookie in {directory} ({dir_cookie}) does not match this bookie's directories "
                f"(journalDirectories={expected.journalDirs}, ledgerDirectories={expected.ledgerDirs})"
                + (
                    "; they are the same dirs in another order: list them as when the bookie was created "
                    "(ledgers are placed, and journal marks kept, by position)"
                    if reordered
                    else ""
                )
            )
    return reference


def record_bookie_id(cookie: Cookie, bookie_id: str) -> Cookie:
    """Note the bookie id (known once the port is bound) in every cookie, if it changed. Blocking."""
    if cookie.bookieHost == bookie_id:
        return cookie
    if cookie.bookieHost:
        log.info("bookie id changed from %s to %s", cookie.bookieHost, bookie_id)
    updated = replace(cookie, bookieHost=bookie_id)
    for directory in [*cookie.journalDirs, *cookie.ledgerDirs]:
        write_cookie(Path(directory), updated)
    return updated


def _holds_data(journal_dirs: list[Path], ledger_dirs: list[Path]) -> bool:
    """Any journal segment, entry log or index in the directories (``current/`` of each)."""
    for directory in journal_dirs:
        current = directory / "current"
        if current.is_dir() and list_segments(current):
            return True
    for directory in ledger_dirs:
        current = directory / "current"
        if current.is_dir() and (list_entry_logs(current) or (current / INDEX_DB_FILE).exists()):
            return True
    return False


def _check_no_data(journal_dirs: list[Path]) -> None:
    for directory in journal_dirs:
        current = directory / "current"
        if current.is_dir() and list_segments(current):
            raise InvalidCookieError(f"{directory} holds journal segments but no cookie")


async def check_store_cookie(store: MetadataStore, bookie_id: str, cookie: Cookie) -> None:
    """Compare ``cookie`` (the dirs') with the one the metadata store holds for ``bookie_id``,
    writing or updating it there (BookKeeper's cookie in ZooKeeper).

    Raises:
        ForeignStoreCookieError: the store holds another instance's cookie for this id.
        InvalidCookieError: the store's cookie kept changing while it was checked.
    """
    path = cookie_path(bookie_id)
    value = json.dumps(asdict(replace(cookie, bookieHost=bookie_id))).encode()
    for _ in range(3):  # compare-and-set: retried if another writer got in between
        existing = await store.get(path)
        try:
            if existing is None:
                await store.put(path, value, NOT_EXISTS)
                return
            try:
                stored = json.loads(existing.value)
            except ValueError:
                stored = {}
            if stored.get("instanceId") != cookie.instanceId:
                raise ForeignStoreCookieError(
                    f"the metadata store holds the cookie of another instance of bookie {bookie_id} "
                    f"({stored.get('instanceId')!r}, dirs {stored.get('journalDirs')} {stored.get('ledgerDirs')}) "
                    f"at {path}, and these directories are instance {cookie.instanceId!r}: they were wiped or "
                    f"belong to another bookie, and the ledgers the cluster placed on {bookie_id} are not here "
                    f"(BookKeeper's cookie mismatch). If the bookie is meant to start empty under this id, "
                    f"delete {path} first"
                )
            if existing.value != value:
                await store.put(path, value, existing.version)
            return
        except (AlreadyExistsError, BadVersionError):
            continue
    raise InvalidCookieError(f"{path} kept changing while this bookie checked it")
