"""Broker load balancing, after Pulsar's ``ModularLoadManagerImpl``.

Every broker publishes a load report (:mod:`.load_report`, written by :mod:`.reporter`) under
``/loadbalance/brokers/{host}:{webport}``; one broker, elected at ``/loadbalance/leader``
(:mod:`.leader`), runs shedding (:mod:`.shedding`), placement for unowned bundles
(:mod:`.placement`) and the auto split check (:mod:`.bundle_split`), keeping bundle history
(:mod:`.bundle_data`) under ``/loadbalance/bundle-data``. :mod:`.load_manager` wires the parts
to a broker; strategies and the data they read are pure, so ``bench/lb_sim.py`` drives the
very same classes with synthetic reports.
"""
