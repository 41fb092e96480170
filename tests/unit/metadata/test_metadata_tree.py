"""Goal: the sans-IO key tree follows the ZooKeeper model exactly (CAS, parents, ephemerals,
sessions, notifications) and survives export/restore unchanged.

Method: direct calls with explicit clocks; a seeded random walk checks the invariants and
compares the tree with a plain-dict model after every step."""

from __future__ import annotations

import random

import pytest

from minipulsar.errors import (
    AlreadyExistsError,
    BadVersionError,
    InvalidCommandError,
    NotEmptyError,
    NotFoundError,
    SessionExpiredError,
)
from minipulsar.metadata.store import Notification, NotificationType
from minipulsar.metadata.tree import KeyTree

C, M, D, CH = (
    NotificationType.CREATED,
    NotificationType.MODIFIED,
    NotificationType.DELETED,
    NotificationType.CHILDREN_CHANGED,
)


def kinds(notifications: list[Notification]) -> list[tuple[str, NotificationType]]:
    return [(n.path, n.type) for n in notifications]


def test_put_creates_at_version_0_and_each_update_adds_one() -> None:
    tree = KeyTree()
    stat, _ = tree.put("/a", b"1", time_ms=10)
    assert (stat.version, stat.created_ms, stat.modified_ms, stat.ephemeral) == (0, 10, 10, False)
    stat, _ = tree.put("/a", b"2", time_ms=20)
    assert (stat.version, stat.created_ms, stat.modified_ms) == (1, 10, 20)
    assert tree.get("/a").value == b"2"


def test_cas_rules() -> None:
    tree = KeyTree()
    with pytest.raises(NotFoundError):
        tree.put("/a", b"x", 0)
    tree.put("/a", b"x", -1)
    with pytest.raises(AlreadyExistsError):
        tree.put("/a", b"y", -1)
    with pytest.raises(BadVersionError):
        tree.put("/a", b"y", 5)
    assert tree.put("/a", b"y", 0)[0].version == 1
    with pytest.raises(InvalidCommandError):
        tree.put("/a", b"z", -2)
    assert tree.get("/a").value == b"y"


def test_missing_parents_are_created_as_empty_persistent_nodes_with_notifications() -> None:
    tree = KeyTree()
    _, notifications = tree.put("/a/b/c", b"v", time_ms=5)
    assert kinds(notifications) == [("/a", C), ("/", CH), ("/a/b", C), ("/a", CH), ("/a/b/c", C), ("/a/b", CH)]
    parent = tree.get("/a/b")
    assert (parent.value, parent.version, parent.owner) == (b"", 0, None)
    assert tree.children("/") == ["a"] and tree.children("/a/b") == ["c"]
    assert tree.children("/nothing") == []


def test_update_notifies_modified_only() -> None:
    tree = KeyTree()
    tree.put("/a", b"1")
    assert kinds(tree.put("/a", b"2")[1]) == [("/a", M)]


def test_delete_rules() -> None:
    tree = KeyTree()
    tree.put("/a/b", b"")
    with pytest.raises(NotEmptyError):
        tree.delete("/a")
    with pytest.raises(NotFoundError):
        tree.delete("/zz")
    with pytest.raises(BadVersionError):
        tree.delete("/a/b", 3)
    with pytest.raises(InvalidCommandError):
        tree.delete("/")
    assert kinds(tree.delete("/a/b", 0)) == [("/a/b", D), ("/a", CH)]
    tree.delete("/a", -1)  # -1 = any version, as in ZooKeeper
    assert tree.children("/") == []


@pytest.mark.parametrize("path", ["a", "/a/", "//a", "/a//b", "", None])
def test_bad_paths_are_invalid_commands(path) -> None:
    with pytest.raises(InvalidCommandError):
        KeyTree().put(path, b"")


def test_ephemeral_node_belongs_to_a_live_session_and_goes_with_it() -> None:
    tree = KeyTree()
    sid = tree.create_session(1000, now_ms=0)
    stat, _ = tree.put("/e/x", b"", owner=sid)
    assert stat.ephemeral and tree.get("/e").owner is None
    tree.put("/e/x", b"again", owner=None)  # update keeps ephemerality
    assert tree.get("/e/x").owner == sid
    with pytest.raises(InvalidCommandError):
        tree.put("/e/x/child", b"")
    with pytest.raises(SessionExpiredError):
        tree.put("/e/y", b"", owner=sid + 99)
    assert kinds(tree.close_session(sid)) == [("/e/x", D), ("/e", CH)]
    assert tree.get("/e/x") is None and tree.get("/e") is not None
    assert tree.close_session(sid) == []
    tree.check_invariants()


def test_sessions_expire_at_their_deadline_unless_kept_alive() -> None:
    tree = KeyTree()
    a = tree.create_session(100, now_ms=0)
    b = tree.create_session(100, now_ms=0)
    tree.put("/a", b"", owner=a)
    tree.put("/b", b"", owner=b)
    tree.keepalive(b, now_ms=80)
    assert tree.expire(now_ms=99) == []
    expired = tree.expire(now_ms=100)
    assert [sid for sid, _ in expired] == [a]
    assert kinds(expired[0][1]) == [("/a", D), ("/", CH)]
    with pytest.raises(SessionExpiredError):
        tree.keepalive(a, now_ms=101)
    assert tree.get("/b") is not None
    assert [sid for sid, _ in tree.expire(now_ms=180)] == [b]


def test_session_ids_are_never_reused() -> None:
    tree = KeyTree()
    first = tree.create_session(100, 0)
    tree.close_session(first)
    second = tree.create_session(100, 0)
    assert second != first
    assert tree.create_session(100, 0, session_id=50) == 50
    assert tree.create_session(100, 0) == 51


def test_export_restore_round_trip_with_fresh_session_deadlines() -> None:
    tree = KeyTree()
    sid = tree.create_session(500, now_ms=0)
    tree.put("/p/q", b"v", time_ms=7)
    tree.put("/p/q", b"w", time_ms=8)
    tree.put("/eph", b"e", owner=sid, time_ms=9)
    restored = KeyTree.restore(tree.export(), now_ms=10_000)
    restored.check_invariants()
    assert restored.export() == tree.export()
    assert restored.get("/p/q").stat() == tree.get("/p/q").stat()
    assert restored.session(sid).deadline_ms == 10_500
    assert restored.expire(now_ms=10_499) == []


def test_random_walk_matches_a_dict_model() -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    tree, model = KeyTree(), {}  # model: path -> (value, version)
    paths = ["/a", "/a/b", "/a/c", "/d", "/d/e/f"]
    for step in range(2000):
        path = rng.choice(paths)
        expected = rng.choice([None, -1, 0, 1, 2])
        try:
            if rng.random() < 0.7:
                stat, _ = tree.put(path, bytes([step % 256]), expected)
                old = model.get(path)
                model[path] = (bytes([step % 256]), 0 if old is None else old[1] + 1)
                for ancestor in _ancestors(path):
                    model.setdefault(ancestor, (b"", 0))
                assert stat.version == model[path][1], f"seed {seed}"
            else:
                tree.delete(path, expected)
                del model[path]
        except (AlreadyExistsError, BadVersionError, NotFoundError, NotEmptyError):
            pass
        tree.check_invariants()
        for p in paths:
            node = tree.get(p)
            assert (None if node is None else (node.value, node.version)) == model.get(p), f"seed {seed} step {step}"


def _ancestors(path: str) -> list[str]:
    parts = path.split("/")[1:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]
