"""A Jepsen-style fault harness: a cluster of real processes under a seeded nemesis, clients
that record every operation, and a checker over the whole history.

- :mod:`history`: what the clients record (every send and its outcome, every consumed message);
- :mod:`checker`: the invariants checked over a history (lost, duplicated, out of order,
  phantom, corrupt, moved, two writers);
- :mod:`proxy`: a fault-injecting TCP proxy in front of every port a partition may cut;
- :mod:`disks`: a small loop-mounted ledger filesystem per faulty bookie, blkio throttling;
- :mod:`cluster`: :class:`~tests.support.cluster.ProcessCluster` with proxies and those disks;
- :mod:`faults`: one small class per fault kind (kill, pause, metastore restart, partition,
  disk full, slow disk), a registry by name;
- :mod:`profiles`: a run's cluster and how hard the nemesis may hit it (``single``, ``overlap``,
  ``five``);
- :mod:`nemesis`: the seeded schedule of faults, overlapping within a profile's limits;
- :mod:`workload`: producers and the final read that fill the history;
- :mod:`run`: one run (profile, seed, duration) → a result and its table.
"""
