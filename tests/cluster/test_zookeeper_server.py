"""Goal: the ZooKeeper test fixture runs a real server (Debian's package) on free ports and
always stops it: one standalone node, and a 3-node ensemble whose leader can be SIGKILLed
and restarted (the failover tests' tools).

Method: start, ask the nodes ``srvr``/``ruok``, kill and restart, stop; then check nothing
answers on the client ports and no process is left."""

from __future__ import annotations

from pathlib import Path

from tests.support.zookeeper import ZooKeeperEnsemble, four_letter_word, skip_unless_zookeeper


def test_one_node_serves_standalone_and_stops(tmp_path: Path) -> None:
    skip_unless_zookeeper()
    with ZooKeeperEnsemble(tmp_path) as zk:
        (node,) = zk.nodes
        assert node.mode() == "standalone"
        assert four_letter_word(node.client_port, "ruok") == "imok"
        assert zk.url == f"zk:127.0.0.1:{node.client_port}"
    assert not node.running
    assert four_letter_word(node.client_port, "ruok") == ""


def test_ensemble_elects_a_new_leader_when_the_leader_is_killed(tmp_path: Path) -> None:
    skip_unless_zookeeper()
    with ZooKeeperEnsemble(tmp_path, nodes=3) as zk:
        first = zk.leader()
        assert first is not None
        assert sorted(node.mode() or "" for node in zk.nodes) == ["follower", "follower", "leader"]
        zk.kill(first)
        assert not zk.nodes[first].running
        zk.wait_ready()  # the two others elect one of them
        second = zk.leader()
        assert second is not None and second != first
        zk.restart(first)
        assert zk.nodes[first].mode() == "follower"
        assert zk.url.count(",") == 2
    assert not any(node.running for node in zk.nodes)
