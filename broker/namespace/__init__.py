"""Namespaces, bundles, ownership and lookup.

- :mod:`.bundles`   hash ranges and topic → bundle (CRC32 of the full topic name), pure;
- :mod:`.split`     the split algorithms (``range_equally_divide``, ``topic_count_equally_divide``), pure;
- :mod:`.policies`  tenants and namespace policies in the metadata store (``/admin/policies/...``);
- :mod:`.ownership` the ephemeral ownership keys ``/namespace/{tenant}/{ns}/{range}`` and this broker's bundles;
- :mod:`.lookup`    the lookup decision of §2.6 (connect / redirect / failed);
- :mod:`.unload`    closing a bundle's topics and telling their clients;
- :mod:`.directory` the live brokers and the load-manager leader, from ``/loadbalance``;
- :mod:`.liveness`  a TCP probe telling a dead owner (refused port) from a slow one;
- :mod:`.remote`    calls to other brokers' admin REST; :mod:`.metrics` lookup/bundle metrics;
- :mod:`.settings`  the namespace keys of the broker's config;
- :mod:`.service`   NamespaceService: what the topics, the connections, the admin API and the load
  manager call.
"""
