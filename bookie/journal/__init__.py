"""The journal: the bookie's write-ahead log with group commit, one writer thread per journal
directory. An add is acknowledged once the group holding it is durable.

One way in, one way out. The event loop admits records with :meth:`Journal.add` — the adds
of one read together, a FENCE alone — after checking :attr:`Journal.has_room`, or right
after :meth:`Journal.wait_for_room` returned. Every record completes through its sink:
``sink.requests_done(requests, started, error)`` on the loop, once per run of one sink's
records admitted one after the other with the same ``started`` (see
:class:`~bookie.journal.journal.JournalSink`). A durable add is put into the ledger storage
(``add_entries``, once per run) before its sink hears of it. No future, no closure and no
call per add: the bookie's own sinks are its connections (the adds' answers) and one small
object per fence.

The modules, along the record's way:

- :mod:`.journal`: the loop side of one journal — admission, the hand-over to the writer
  thread (ONE per loop iteration), the waiters for room, each group's completion;
- :mod:`.batch`: the records in flight between the two sides;
- :mod:`.writer_thread`: the writer thread — groups written with ONE ``pwritev`` each, handed
  back with ONE ``call_soon_threadsafe`` each;
- :mod:`.group_commit`: when a group is flushed (BookKeeper's group-commit rules);
- :mod:`.directory`: the segments of one journal directory as the writer sees them — the one
  appended to, the next one created ahead, rolling, trimming, replay;
- :mod:`.segment`: one segment file — scanning it, appending to it, preallocating it;
- :mod:`.format`: the bytes on disk;
- :mod:`.journal_set`: every journal of a bookie (ledger ``L`` in journal ``L mod n``), the
  checkpoint source of the ledger storage;
- :mod:`.settings`, :mod:`.stats`: the journal keys and counters.

Invariants:

- a record completes only after its group was written and, with ``journalSyncData``,
  synced: an add is acknowledged only once durable; records complete in queue order;
- records of one journal reach the disk in the order they were admitted;
- admission is bounded (``journalQueueSize`` records, ``journalMaxMemorySizeMb`` bytes, from
  admitted until completed): past the bound callers await :meth:`Journal.wait_for_room`
  (FIFO) — adds are slowed down, never dropped (the adds of one read are admitted whole
  while the queue is below its bound, so the bound may be exceeded by one run; a FENCE is
  never held back);
- a failed write, sync or roll fails the group and every later record: the file position is
  no longer trustworthy, so the journal stops accepting instead of guessing;
- :attr:`Journal.applied_mark` is the end of the last group whose records were all completed
  on the loop (adds: put into the ledger storage). It is what a checkpoint captures; the
  segments wholly before a persisted checkpoint are deleted, and a restart replays only
  from it (:meth:`Journal.replay`).
"""
