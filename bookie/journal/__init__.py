"""The journal: the bookie's write-ahead log with group commit (see :mod:`.journal`)."""
