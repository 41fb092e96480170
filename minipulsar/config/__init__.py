"""Typed configuration, read from Pulsar-style ``key=value`` files and overridden by CLI flags.

Each server has one frozen dataclass whose fields are settings named as Pulsar, BookKeeper or
ZooKeeper name the keys, so ``broker.conf`` / ``bookkeeper.conf`` / ``metastore.conf`` read
like the originals:

- :mod:`.settings`: :func:`setting`, a config field, and the :class:`Setting` it holds;
- :mod:`.loader`: files and overrides into a config (its docstring states the loading rules);
- :mod:`.metastore`, :mod:`.bookie`, :mod:`.broker`: the servers' configs. Defaults follow
  Pulsar's broker.conf / bookkeeper.conf unless a setting's ``upstream`` says otherwise;
- :mod:`.conf_files`: the shipped ``conf/*.conf``, generated from the settings;
- :class:`ConfigError` (from :mod:`minipulsar.errors`) is what every refusal raises.
"""

from minipulsar.config.bookie import BookieConfig
from minipulsar.config.broker import BrokerConfig
from minipulsar.config.conf_files import CONF_FILES, ConfFile, conf_file, conf_text
from minipulsar.config.loader import load_config, parse_bool, parse_config_text
from minipulsar.config.metastore import MetastoreConfig
from minipulsar.config.settings import Alias, Setting, config_keys, config_settings, setting
from minipulsar.errors import ConfigError

__all__ = [
    "CONF_FILES",
    "Alias",
    "BookieConfig",
    "BrokerConfig",
    "ConfFile",
    "ConfigError",
    "MetastoreConfig",
    "Setting",
    "conf_file",
    "conf_text",
    "config_keys",
    "config_settings",
    "load_config",
    "parse_bool",
    "parse_config_text",
    "setting",
]
