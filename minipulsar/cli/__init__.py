"""The ``minipulsar`` command line: servers, standalone, client verbs."""
