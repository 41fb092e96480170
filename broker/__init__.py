"""The broker: serves topics to clients, stores them in BookKeeper ledgers (DESIGN §1)."""
