"""The web console: one page on every broker's web port (``/console/``) showing the whole cluster.

The page (``static/``: plain HTML, CSS and an ES module, with the vendored uPlot for its charts;
no build step) polls ``/console/api/cluster`` every few seconds. That document is gathered by
the broker serving the page from the metadata store, from every broker's per-broker REST
endpoints (Pulsar's ``/admin/v2/broker-stats/…`` shapes) and from every registered bookie's
load report, server-side, with short deadlines (:mod:`.gather`), so the browser talks to one
origin only. The charts' history lives in the page: the broker keeps none.
"""
