// minipulsar console: polls api/cluster, renders the tables, and keeps the charts' history.
//
// The broker keeps no history: each refresh adds one point per chart here, and the last
// HISTORY_S seconds are kept. Live message rates are the brokers' counters (msgInCount, ...)
// differenced between two documents; a counter that went down (a broker restarted, a topic
// moved away) contributes nothing to that interval. Everything shown comes from strings and
// numbers of the document, put into the page as text (never as HTML).

const params = new URLSearchParams(location.search);
const REFRESH_S = Math.max(1, Number(params.get("refresh")) || 3);
const HISTORY_S = 600;
const PALETTE = ["#60a5fa", "#f472b6", "#34d399", "#fbbf24", "#a78bfa", "#f87171", "#22d3ee", "#fb923c"];

// ---- formatting: every figure with its unit -------------------------------------------------

const nf = (digits) => new Intl.NumberFormat("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
const NF0 = nf(0), NF1 = nf(1), NF2 = nf(2);

function short(v) {
  const a = Math.abs(v);
  return (a >= 100 ? NF0 : a >= 10 ? NF1 : NF2).format(v);
}

function scaled(value, steps, glue = " ") {
  // steps: [[threshold, divisor, unit], ...], largest first; null below the last threshold
  for (const [limit, div, unit] of steps) {
    if (Math.abs(value) >= limit) return `${short(value / div)}${glue}${unit}`;
  }
  return null;
}

function fmtCount(value, unit = "") {
  if (value == null || Number.isNaN(value)) return "–";
  const plain = Number.isInteger(value) || Math.abs(value) >= 100 ? NF0 : NF1;
  const text = scaled(value, [[1e9, 1e9, "G"], [1e6, 1e6, "M"], [1e4, 1e3, "k"]], "") ?? plain.format(value);
  return unit ? `${text} ${unit}` : text;
}

const fmtMsgRate = (v) => fmtCount(v, "msg/s");
const fmtMsgs = (v) => fmtCount(v, "msgs");

function fmtBytes(value) {
  if (value == null || Number.isNaN(value)) return "–";
  return scaled(value, [[1e12, 1e12, "TB"], [1e9, 1e9, "GB"], [1e6, 1e6, "MB"], [1e3, 1e3, "kB"]]) ?? `${NF0.format(value)} B`;
}

const fmtByteRate = (v) => (v == null ? "–" : `${fmtBytes(v)}/s`);

function fmtMs(value) {
  if (value == null || Number.isNaN(value)) return "–";
  return `${(value >= 100 ? NF0 : value >= 10 ? NF1 : NF2).format(value)} ms`;
}

function pair(a, b) {
  // "1.2 Mbit/s / 3.4 Mbit/s" → "1.2 / 3.4 Mbit/s" when both have the same unit
  const [va, ...ua] = a.split(" "), [vb, ...ub] = b.split(" ");
  return ua.join(" ") === ub.join(" ") ? `${va} / ${vb} ${ua.join(" ")}`.trim() : `${a} / ${b}`;
}

const fmtPct = (v) => (v == null || Number.isNaN(v) ? "–" : `${(v >= 10 ? NF0 : NF1).format(v)} %`);

function fmtKbits(kbits) {
  if (kbits == null) return "–";
  return scaled(kbits, [[1e6, 1e6, "Gbit/s"], [1e3, 1e3, "Mbit/s"]]) ?? `${NF0.format(kbits)} kbit/s`;
}

function fmtAge(ms) {
  if (ms == null || ms < 0) return "–";
  const s = ms / 1000;
  if (s < 90) return `${NF0.format(s)} s ago`;
  if (s < 5400) return `${NF0.format(s / 60)} min ago`;
  return `${NF1.format(s / 3600)} h ago`;
}

// ---- DOM helpers ----------------------------------------------------------------------------

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value == null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "data") for (const [k, v] of Object.entries(value)) el.dataset[k] = v;
    else el.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child == null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

const badge = (text, kind, title) => h("span", { class: `badge badge-${kind}`, title }, text);
const num = (text, title) => h("td", { class: "num", title }, text);

function gauge(percent, text) {
  const p = Math.max(0, Math.min(100, percent ?? 0));
  const level = p >= 90 ? " bad" : p >= 75 ? " warn" : "";
  return h("div", { class: "gauge" },
    h("div", { class: "bar" }, h("div", { class: `fill${level}`, style: `width:${p.toFixed(1)}%` })),
    h("span", {}, text));
}

function usagePercent(resource) {
  return resource && resource.limit > 0 ? (100 * resource.usage) / resource.limit : null;
}

function fillBody(table, rows, columns, emptyText) {
  const body = document.querySelector(`#${table} tbody`);
  body.replaceChildren(...(rows.length ? rows : [h("tr", {}, h("td", { class: "empty", colspan: columns }, emptyText))]));
}

// ---- live rates from counters ---------------------------------------------------------------

const COUNTERS = ["msgInCount", "msgOutCount", "bytesInCount", "bytesOutCount"];

function counterRates(previous, current, keyOf, countersOf) {
  // Per key present in both documents with counters in both: {msgInCount: per second, ...};
  // a counter that went down reads null (it restarted: no rate for this interval).
  const dt = (current.time - previous.time) / 1000;
  const rates = new Map();
  if (!(dt > 0)) return rates;
  const before = new Map(previous.items.map((item) => [keyOf(item), countersOf(item)]));
  for (const item of current.items) {
    const old = before.get(keyOf(item));
    const now = countersOf(item);
    if (!old || !now) continue;
    const rate = {};
    for (const c of COUNTERS) {
      const delta = now[c] - old[c];
      rate[c] = delta >= 0 ? delta / dt : null;
    }
    rates.set(keyOf(item), rate);
  }
  return rates;
}

// ---- charts (uPlot) -------------------------------------------------------------------------

const latest = (values) => {
  for (let i = values.length - 1; i >= 0; i--) if (values[i] != null) return values[i];
  return null;
};
const timeLabel = (t) => (t == null ? "–" : new Date(t * 1000).toLocaleTimeString());

const AXIS = { stroke: "#8b98a8", grid: { stroke: "#222b38", width: 1 }, ticks: { stroke: "#263040", width: 1 } };

class Chart {
  constructor(id, format) {
    this.figure = document.getElementById(id);
    this.target = this.figure.querySelector(".plot");
    this.format = format;
    this.plot = null;
    this.names = [];
    new ResizeObserver(() => this.plot?.setSize(this.size())).observe(this.target);
  }

  size() {
    return { width: Math.max(200, this.target.clientWidth - 4), height: 190 };
  }

  draw(times, named) {
    // named: [[label, values, color], ...], values aligned with times.
    const names = named.map(([label]) => label);
    if (!this.plot || names.join("\n") !== this.names.join("\n")) {
      this.plot?.destroy();
      this.names = names;
      const format = this.format;
      this.plot = new uPlot({
        ...this.size(),
        cursor: { points: { size: 6 } },
        legend: { live: true },
        scales: { x: { time: true }, y: { range: (u, min, max) => [0, max > 0 ? max * 1.15 : 1] } },
        axes: [
          { ...AXIS },
          { ...AXIS, size: 64, values: (u, ticks) => ticks.map((v) => format(v)) },
        ],
        series: [
          { label: "time", value: (u, v, s, idx) => timeLabel(idx == null ? latest(u.data[0]) : v) },
          ...named.map(([label, , color]) => ({
            label,
            stroke: color,
            width: 1.6,
            fill: `${color}1f`,
            points: { show: false },
            // not hovering: the newest value
            value: (u, v, s, idx) => {
              const shown = idx == null ? latest(u.data[s]) : v;
              return shown == null ? "–" : format(shown);
            },
          })),
        ],
      }, [times, ...named.map(([, values]) => values)], this.target);
    } else {
      this.plot.setData([times, ...named.map(([, values]) => values)]);
    }
    this.figure.dataset.points = String(times.length);
  }
}

const MB = 1e6;
const charts = {
  msgs: new Chart("chart-msgs", (v) => fmtCount(v)),
  bytes: new Chart("chart-bytes", (v) => (v >= 10 ? NF0 : v >= 1 ? NF1 : NF2).format(v)),
  journal: new Chart("chart-journal", (v) => (v >= 10 ? NF0 : v >= 1 ? NF1 : NF2).format(v)),
};

// history: one entry per document, the newest last
const history = [];
let previous = null;

function record(doc) {
  const point = { t: doc.time / 1000, msgIn: null, msgOut: null, bytesIn: null, bytesOut: null, journal: {} };
  if (previous && doc.time > previous.time) {
    const perBroker = counterRates(
      { time: previous.time, items: previous.brokers },
      { time: doc.time, items: doc.brokers },
      (b) => b.brokerId,
      (b) => b.counters,
    );
    const sum = (c) => [...perBroker.values()].reduce((acc, r) => acc + (r[c] ?? 0), 0);
    if (perBroker.size) {
      point.msgIn = sum("msgInCount");
      point.msgOut = sum("msgOutCount");
      point.bytesIn = sum("bytesInCount") / MB;
      point.bytesOut = sum("bytesOutCount") / MB;
    }
  }
  for (const bookie of doc.bookies) {
    const rate = bookie.info?.journalWriteBytesPerSecond;
    point.journal[bookie.bookieId] = typeof rate === "number" ? rate / MB : null;
  }
  if (!previous || doc.time > previous.time) history.push(point);
  while (history.length && history[0].t < point.t - HISTORY_S) history.shift();
}

function drawCharts(doc) {
  const times = history.map((p) => p.t);
  const column = (key) => history.map((p) => p[key]);
  charts.msgs.draw(times, [["in", column("msgIn"), "#3b82f6"], ["out", column("msgOut"), "#22c55e"]]);
  charts.bytes.draw(times, [["in", column("bytesIn"), "#3b82f6"], ["out", column("bytesOut"), "#22c55e"]]);
  const bookies = doc.bookies.map((b) => b.bookieId);
  charts.journal.draw(times, bookies.map((id, i) => [id, history.map((p) => p.journal[id] ?? null), PALETTE[i % PALETTE.length]]));
}

// ---- tables ---------------------------------------------------------------------------------

function brokerRow(b, doc) {
  const load = b.load;
  const cpu = usagePercent(load?.cpu);
  const mem = load?.memory;
  const cores = load?.cpu?.limit ? load.cpu.limit / 100 : null;
  const status = b.reachable
    ? (b.errors.length ? badge("partial", "warn", b.errors.join("\n")) : badge("up", "ok"))
    : badge("unreachable", "bad", b.errors.join("\n"));
  return h("tr", { class: b.reachable ? null : "unreachable", data: { brokerId: b.brokerId } },
    h("td", { class: "id" }, b.brokerId, " ", b.leader && badge("leader", "leader", "load-balancer leader"),
      b.self && badge("this page", "self", "the broker serving this page")),
    h("td", { title: b.errors.join("\n") || null }, status,
      !b.reachable && b.errors.length ? h("span", { class: "sub" }, b.errors[0]) : null),
    h("td", {}, load ? gauge(cpu, `${fmtPct(cpu)}${cores ? ` of ${NF0.format(cores)} cores` : ""}`) : "–"),
    num(mem ? fmtBytes(mem.usage * 1048576) : "–", mem ? `${fmtPct(usagePercent(mem))} of ${fmtBytes(mem.limit * 1048576)}` : null),
    num(load ? pair(fmtKbits(load.bandwidthIn?.usage), fmtKbits(load.bandwidthOut?.usage)) : "–",
      load ? `of ${fmtKbits(load.bandwidthIn?.limit)} each way` : null),
    num(load ? pair(fmtMsgRate(load.msgRateIn), fmtMsgRate(load.msgRateOut)) : "–", "the load report's rates"),
    num(b.reachable ? NF0.format(b.topics) : "–"),
    num(b.reachable ? NF0.format(b.bundles.length) : "–", b.bundles.join("\n") || null),
    num(load ? `${NF0.format(load.numProducers ?? 0)} / ${NF0.format(load.numConsumers ?? 0)}` : "–"),
    num(load?.lastUpdate ? fmtAge(doc.time - load.lastUpdate) : "–"),
  );
}

const STATE_BADGES = {
  writable: ["writable", "ok"],
  readonly: ["read-only", "warn"],
  down: ["down", "bad"],
};

function bookieRow(b) {
  const info = b.info ?? {};
  const [stateText, stateKind] = STATE_BADGES[b.state] ?? [b.state, "muted"];
  const used = typeof info.ledgerDirsUsedFraction === "number" ? info.ledgerDirsUsedFraction * 100 : null;
  const notes = [];
  if (info.readOnlyReasons?.length) notes.push(`read-only: ${info.readOnlyReasons.join(", ")}`);
  if (b.error) notes.push(b.error);
  const quarantine = b.quarantinedBy.length
    ? badge("quarantined", "bad", `by ${b.quarantinedBy.join(", ")}`)
    : badge("none", "muted", "no broker's BookKeeper client has it in quarantine");
  return h("tr", { class: b.state === "down" ? "unreachable" : null, data: { bookieId: b.bookieId } },
    h("td", { class: "id" }, b.bookieId),
    h("td", {}, badge(stateText, stateKind)),
    h("td", {}, quarantine, b.quarantinedBy.length ? h("span", { class: "sub" }, `by ${b.quarantinedBy.join(", ")}`) : null),
    num(b.info ? fmtByteRate(info.journalWriteBytesPerSecond) : "–"),
    num(fmtMs(info.addEntryLatencyMsP99)),
    num(fmtMs(info.journalSyncLatencyMsP99)),
    h("td", {}, used == null ? "–" : gauge(used, `${fmtPct(used)} · ${fmtBytes(info.ledgerDirsFreeBytes)} free`)),
    num(b.info ? `${NF0.format(info.pendingAdds ?? 0)} / ${NF0.format(info.pendingReads ?? 0)}` : "–"),
    num(b.info ? fmtPct(info.cpuUsedRate) : "–", "percent of one core"),
    h("td", { class: "wrap muted" }, notes.join(" · ") || ""),
  );
}

function topicRow(t, live) {
  const rate = (counter, fallback) => (live?.[counter] ?? fallback);
  const short = t.topic.replace(/^persistent:\/\//, "");
  const subs = t.subscriptions.map((s) => h("span", { class: "sub-chip" },
    h("span", { class: "name" }, s.name), ` ${s.type} · ${s.consumers} consumer${s.consumers === 1 ? "" : "s"} · ${fmtMsgs(s.msgBacklog)}`));
  return h("tr", { data: { topic: t.topic } },
    h("td", { class: "id", title: `${t.topic}\nbundle ${t.bundle}` }, short),
    h("td", { class: "id" }, t.broker),
    num(fmtMsgRate(rate("msgInCount", t.msgRateIn))),
    num(fmtMsgRate(rate("msgOutCount", t.msgRateOut))),
    num(fmtByteRate(rate("bytesInCount", t.msgThroughputIn))),
    num(fmtByteRate(rate("bytesOutCount", t.msgThroughputOut))),
    num(fmtMsgs(t.msgBacklog), `${fmtBytes(t.backlogSize)} of backlog`),
    num(fmtBytes(t.storageSize)),
    num(NF0.format(t.producerCount)),
    h("td", { class: "wrap" }, subs.length ? h("div", { class: "subs" }, subs) : h("span", { class: "muted" }, "none")),
  );
}

let topicRates = new Map();
let lastDoc = null;

function renderTopics(doc) {
  const filter = document.getElementById("topic-filter").value.trim().toLowerCase();
  // by name: rows keep their place from one refresh to the next (the server picked the busiest)
  const shown = doc.topics
    .filter((t) => !filter || t.topic.toLowerCase().includes(filter))
    .sort((a, b) => a.topic.localeCompare(b.topic) || a.broker.localeCompare(b.broker));
  fillBody("topics", shown.map((t) => topicRow(t, topicRates.get(`${t.broker} ${t.topic}`))), 10,
    doc.topics.length ? "no topic matches the filter" : "no topic is loaded on any broker");
  const capped = doc.topicsTotal > doc.topics.length ? ` (the ${doc.topics.length} busiest shown)` : "";
  document.getElementById("topics-count").textContent = `${NF0.format(doc.topicsTotal)}${capped}`;
}

function tile(label, value, unit, detail) {
  return h("div", { class: "tile" }, h("div", { class: "label" }, label),
    h("div", { class: "value" }, value, unit ? h("span", { class: "unit" }, unit) : null),
    h("div", { class: "detail" }, detail ?? ""));
}

function renderTiles(doc) {
  const last = history[history.length - 1] ?? {};
  const up = doc.brokers.filter((b) => b.reachable).length;
  const states = (s) => doc.bookies.filter((b) => b.state === s).length;
  const quarantined = doc.bookies.filter((b) => b.quarantinedBy.length).length;
  const backlog = doc.topics.reduce((acc, t) => acc + t.msgBacklog, 0);
  const journal = doc.bookies.reduce((acc, b) => acc + (b.info?.journalWriteBytesPerSecond ?? 0), 0);
  const split = (text) => {
    const [value, ...unit] = text.split(" ");
    return [value, unit.join(" ")];
  };
  document.getElementById("tiles").replaceChildren(
    tile("Brokers", `${up}/${doc.brokers.length}`, "up", doc.leader ? `leader ${doc.leader}` : "no leader elected"),
    tile("Bookies", `${states("writable")}/${doc.bookies.length}`, "writable",
      `${states("readonly")} read-only · ${states("down")} down · ${quarantined} quarantined`),
    tile("Topics", NF0.format(doc.topicsTotal), "", `${NF0.format(doc.brokers.reduce((a, b) => a + b.bundles.length, 0))} bundles owned`),
    tile("Publish", ...split(fmtMsgRate(last.msgIn ?? doc.totals.msgRateIn)), `${fmtByteRate((last.bytesIn ?? doc.totals.msgThroughputIn / MB) * MB)}`),
    tile("Dispatch", ...split(fmtMsgRate(last.msgOut ?? doc.totals.msgRateOut)), `${fmtByteRate((last.bytesOut ?? doc.totals.msgThroughputOut / MB) * MB)}`),
    tile("Backlog", ...split(fmtMsgs(backlog)), "unacknowledged, listed topics"),
    tile("Journal writes", ...split(fmtByteRate(journal)), "all bookies"),
  );
}

function render(doc) {
  document.getElementById("cluster").textContent = doc.cluster;
  document.getElementById("served-by").textContent = doc.servedBy;
  const errors = document.getElementById("errors");
  errors.hidden = !doc.errors.length;
  errors.textContent = doc.errors.join(" · ");
  renderTiles(doc);
  fillBody("brokers", doc.brokers.map((b) => brokerRow(b, doc)), 10, "no broker is registered");
  fillBody("bookies", doc.bookies.map(bookieRow), 10, "no bookie is known");
  document.getElementById("brokers-count").textContent = `${doc.brokers.length}`;
  document.getElementById("bookies-count").textContent = `${doc.bookies.length}`;
  renderTopics(doc);
  drawCharts(doc);
}

// ---- the loop -------------------------------------------------------------------------------

function setStatus(text, kind, detail) {
  const pill = document.getElementById("status");
  pill.textContent = text;
  pill.className = `pill pill-${kind}`;
  pill.title = detail ?? "";
}

async function refresh() {
  try {
    const response = await fetch("api/cluster", { cache: "no-store" });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    const doc = await response.json();
    if (previous && doc.time > previous.time) {
      topicRates = counterRates({ time: previous.time, items: previous.topics }, { time: doc.time, items: doc.topics },
        (t) => `${t.broker} ${t.topic}`, (t) => t);
    }
    record(doc);
    if (!previous || doc.time >= previous.time) previous = doc;
    lastDoc = doc;
    render(doc);
    setStatus("live", "ok", `refreshing every ${REFRESH_S} s`);
    document.getElementById("updated").textContent = `updated ${new Date(doc.time).toLocaleTimeString()}`;
  } catch (error) {
    setStatus(lastDoc ? "stale" : "unreachable", lastDoc ? "warn" : "bad", String(error));
  } finally {
    setTimeout(refresh, REFRESH_S * 1000);
  }
}

document.getElementById("topic-filter").addEventListener("input", () => lastDoc && renderTopics(lastDoc));
refresh();
