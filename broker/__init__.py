"""The broker: serves topics to clients, stores them in BookKeeper ledgers (docs/design.md §1)."""
