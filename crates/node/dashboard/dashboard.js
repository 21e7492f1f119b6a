// dashboard.js: the live dashboard's polling and rendering. Every 2 s it reads
// this node's /v1/status (the ring and every node's state: UN, DN, UJ, UL) and,
// for each node, its /v1/proxyhistograms, compactionstats, hints, netstats and
// repair_admin, through this node's proxy (/dashboard/peer/<address>/v1/...).
// Throughput is the change of each node's request counts between two polls;
// while a node does not serve /v1/proxyhistograms its throughput and latency
// show "no data", never a made-up number.
//
// For tests and scripts, the DOM carries what is shown: #nodes rows have
// data-address, data-state, data-state-since (unix ms of the last change of
// state seen by the page), data-write-rate and data-read-rate; the tiles have
// data-value (empty while there is no data); #updated has data-polls.
"use strict";
(function () {
  const POLL_MS = 2000;
  // The charts show the last 5 minutes, or since the page opened (at least 1 minute).
  const WINDOW_MS = 5 * 60 * 1000;
  const MIN_WINDOW_MS = 60 * 1000;
  const opened = Date.now();
  const OPS = ["read", "write", "range", "cas_read", "cas_write"];
  // Where the admin API is: the page's own path less "/dashboard" (it may sit behind a prefix).
  const ROOT = location.pathname.replace(/\/dashboard\/?$/, "");

  const prev = new Map();      // host_id -> {t, counts: {op: n}, timeouts, unavailables}
  const states = new Map();    // host_id -> {state, since}
  const history = {            // series of [unixMillis, value]
    writes: [], reads: [], errors: [],
    writeP99: new Map(), readP99: new Map(), compactions: new Map(), hints: new Map(),
  };
  let polls = 0;
  let busy = false;

  async function getJson(path) {
    try {
      const r = await fetch(ROOT + path, { cache: "no-store" });
      let body = null;
      try { body = await r.json(); } catch (e) { body = null; }
      if (!r.ok) return { error: (body && body.error) || `HTTP ${r.status}`, status: r.status };
      return body;
    } catch (e) {
      return { error: String(e), status: 0 };
    }
  }

  function nodeGet(node, local, endpoint) {
    if (node.host_id === local) return getJson(`/v1/${endpoint}`);
    return getJson(`/dashboard/peer/${encodeURIComponent(node.address)}/v1/${endpoint}`);
  }

  function ok(x) { return x && !x.error; }

  function push(series, t, v) {
    series.push([t, v]);
    while (series.length && series[0][0] < t - WINDOW_MS) series.shift();
  }

  function pushKeyed(map, key, t, v) {
    if (!map.has(key)) map.set(key, []);
    push(map.get(key), t, v);
  }

  // Bytes in binary units; `short`: at most 3 significant digits (axis labels).
  function bytes(n, short) {
    if (n === null || n === undefined) return "-";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0, v = n;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    const digits = i === 0 ? 0 : (short ? (v >= 100 ? 0 : v >= 10 ? 1 : 2) : 2);
    return `${Number(v.toFixed(digits))} ${units[i]}`;
  }

  function rate(v) {
    if (v === null || v === undefined) return "no data";
    return v >= 100 ? v.toFixed(0) : v.toFixed(1);
  }

  function millis(us) {
    if (us === null || us === undefined) return "no data";
    const ms = us / 1000;
    return ms >= 100 ? `${ms.toFixed(0)} ms` : `${ms.toFixed(2)} ms`;
  }

  function cell(row, text, cls) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    row.appendChild(td);
    return td;
  }

  // Per node: rates since the previous poll (null until two samples of a node that serves them).
  function nodeRates(node, hist, t) {
    const out = { write: null, read: null, writeP99: null, readP99: null, timeouts: null, unavailables: null,
                  errorRate: null };
    if (!ok(hist) || !hist.write) { prev.delete(node.host_id); return out; }
    const counts = {};
    let timeouts = 0, unavailables = 0;
    for (const op of OPS) {
      const h = hist[op] || {};
      counts[op] = h.count || 0;
      timeouts += h.timeouts || 0;
      unavailables += h.unavailables || 0;
    }
    out.timeouts = timeouts;
    out.unavailables = unavailables;
    const p = (op) => (hist[op] && hist[op].count > 0 && hist[op].percentiles_us) ? hist[op].percentiles_us["99"] : null;
    out.writeP99 = p("write");
    out.readP99 = p("read");
    const before = prev.get(node.host_id);
    prev.set(node.host_id, { t, counts, timeouts, unavailables });
    if (before && t > before.t) {
      const dt = (t - before.t) / 1000;
      const d = (op) => Math.max(0, counts[op] - (before.counts[op] || 0));
      // A restarted node counts from zero again: no rate for that interval.
      if (OPS.every(op => counts[op] >= (before.counts[op] || 0))) {
        out.write = (d("write") + d("cas_write")) / dt;
        out.read = (d("read") + d("range") + d("cas_read")) / dt;
        out.errorRate = Math.max(0, (timeouts + unavailables) - (before.timeouts + before.unavailables)) / dt;
      }
    }
    return out;
  }

  function renderNodes(nodes, per) {
    const tbody = document.querySelector("#nodes tbody");
    const rows = [];
    for (const n of nodes) {
      const r = per.get(n.host_id);
      const tr = document.createElement("tr");
      tr.dataset.address = n.address;
      tr.dataset.hostId = n.host_id;
      tr.dataset.state = n.state;
      tr.dataset.stateSince = String(states.get(n.host_id).since);
      tr.dataset.writeRate = r.rates.write === null ? "" : String(r.rates.write);
      tr.dataset.readRate = r.rates.read === null ? "" : String(r.rates.read);
      cell(tr, n.state, "state");
      cell(tr, n.address, "text");
      cell(tr, n.dc, "text");
      cell(tr, n.rack, "text");
      cell(tr, bytes(n.load_bytes));
      cell(tr, String(n.tokens));
      cell(tr, n.owns === null || n.owns === undefined ? "?" : `${(n.owns * 100).toFixed(1)}%`);
      cell(tr, rate(r.rates.write));
      cell(tr, rate(r.rates.read));
      cell(tr, millis(r.rates.writeP99));
      cell(tr, millis(r.rates.readP99));
      cell(tr, r.rates.timeouts === null ? "no data" : String(r.rates.timeouts));
      cell(tr, r.rates.unavailables === null ? "no data" : String(r.rates.unavailables));
      cell(tr, ok(r.compactions) ? String(r.compactions.pending_tasks) : "-");
      cell(tr, ok(r.hints) ? bytes(r.hints.total_bytes) : "-");
      cell(tr, ok(r.netstats) ? String(r.netstats.sessions.filter(s => s.state === "running").length) : "-");
      cell(tr, n.host_id.slice(0, 8), "text").title = n.host_id;
      rows.push(tr);
    }
    tbody.replaceChildren(...rows);
  }

  // Running sessions, then the most recent finished ones (a bootstrap leaves one per table and peer).
  function renderStreams(nodes, per) {
    const all = [];
    for (const n of nodes) {
      const ns = per.get(n.host_id).netstats;
      if (ok(ns)) for (const s of ns.sessions) all.push([n.address, s]);
    }
    const running = all.filter(([, s]) => s.state === "running");
    const finished = all.filter(([, s]) => s.state !== "running")
      .sort((a, b) => (b[1].started_unix_ms || 0) - (a[1].started_unix_ms || 0)).slice(0, 6);
    const rows = running.concat(finished).map(([addr, s]) => {
      const tr = document.createElement("tr");
      cell(tr, addr, "text");
      cell(tr, String(s.peer), "text");
      cell(tr, String(s.direction), "text");
      const pct = s.bytes_total > 0 ? ` (${(100 * s.bytes_done / s.bytes_total).toFixed(0)}%)` : "";
      cell(tr, `${bytes(s.bytes_done)} / ${bytes(s.bytes_total)}${pct}`);
      cell(tr, s.state, "text");
      return tr;
    });
    const tr = document.createElement("tr");
    cell(tr, rows.length === 0 ? "no stream sessions" :
      `${running.length} running, ${all.length - running.length} finished (the last ${finished.length} shown)`, "text").colSpan = 5;
    rows.push(tr);
    document.querySelector("#streams tbody").replaceChildren(...rows);
  }

  function renderRepairs(nodes, per) {
    const all = [];
    for (const n of nodes) {
      const ra = per.get(n.host_id).repairs;
      if (ok(ra)) for (const r of ra.repairs) all.push([n.address, r]);
    }
    all.sort((a, b) => (b[1].started_unix_s || 0) - (a[1].started_unix_s || 0));
    const rows = all.slice(0, 12).map(([addr, r]) => {
      const tr = document.createElement("tr");
      cell(tr, addr, "text");
      cell(tr, r.keyspace || "(all)", "text");
      cell(tr, r.trigger || "", "text");
      cell(tr, r.mode || "", "text");
      cell(tr, r.started_unix_s ? new Date(r.started_unix_s * 1000).toLocaleTimeString() : "", "text");
      cell(tr, r.state || "", "text");
      return tr;
    });
    if (rows.length === 0) {
      const tr = document.createElement("tr");
      cell(tr, "no repairs run since the nodes started", "text").colSpan = 6;
      rows.push(tr);
    }
    document.querySelector("#repairs tbody").replaceChildren(...rows);
  }

  function setTile(id, value, text) {
    const e = document.getElementById(id);
    e.dataset.value = value === null || value === undefined ? "" : String(value);
    e.textContent = text;
  }

  function keyedSeries(map, nodes) {
    return nodes.filter(n => map.has(n.host_id)).map(n => ({ name: n.address, points: map.get(n.host_id) }));
  }

  function drawCharts(nodes, t) {
    const common = { now: t, windowMs: Math.min(WINDOW_MS, Math.max(MIN_WINDOW_MS, t - opened)) };
    Lines.draw(document.getElementById("chart-throughput"), Object.assign({
      series: [{ name: "writes/s", points: history.writes }, { name: "reads/s", points: history.reads }],
      format: v => v >= 1000 ? `${(v / 1000).toFixed(v >= 10000 ? 0 : 1)}k` : v.toFixed(0),
    }, common));
    const ms = v => v >= 10 ? v.toFixed(0) + " ms" : v.toFixed(1) + " ms";
    Lines.draw(document.getElementById("chart-write-p99"), Object.assign({
      series: keyedSeries(history.writeP99, nodes), format: ms }, common));
    Lines.draw(document.getElementById("chart-read-p99"), Object.assign({
      series: keyedSeries(history.readP99, nodes), format: ms }, common));
    Lines.draw(document.getElementById("chart-errors"), Object.assign({
      series: [{ name: "timeouts + unavailables /s", points: history.errors }], format: v => v.toFixed(v < 10 ? 1 : 0) }, common));
    Lines.draw(document.getElementById("chart-compactions"), Object.assign({
      series: keyedSeries(history.compactions, nodes), format: v => v.toFixed(0) }, common));
    Lines.draw(document.getElementById("chart-hints"), Object.assign({
      series: keyedSeries(history.hints, nodes), format: v => bytes(v, true), binary: true }, common));
  }

  async function poll() {
    if (busy) return;
    busy = true;
    try {
      const status = await getJson("/v1/status");
      const errorEl = document.getElementById("error");
      if (!ok(status)) {
        errorEl.hidden = false;
        errorEl.textContent = `this node's /v1/status failed: ${status.error}`;
        return;
      }
      errorEl.hidden = true;
      const t = Date.now();
      const nodes = [];
      for (const dc of status.datacenters) for (const n of dc.nodes) nodes.push(Object.assign({ dc: dc.name }, n));
      document.getElementById("cluster-name").textContent = status.cluster_name;
      const local = status.local_host_id;
      const me = nodes.find(n => n.host_id === local);
      document.getElementById("served-by").textContent = me ? me.address : "?";

      const per = new Map();
      await Promise.all(nodes.map(async n => {
        const [hist, compactions, hints, netstats, repairs] = await Promise.all(
          ["proxyhistograms", "compactionstats", "hints", "netstats", "repair_admin"].map(e => nodeGet(n, local, e)));
        per.set(n.host_id, { hist, compactions, hints, netstats, repairs });
      }));
      const sample = Date.now();
      let writes = null, reads = null, errs = null, writeP99 = null, readP99 = null;
      let timeouts = null, unavailables = null, compactions = 0, hints = 0, streams = 0;
      for (const n of nodes) {
        const r = per.get(n.host_id);
        const s = states.get(n.host_id);
        if (!s || s.state !== n.state) states.set(n.host_id, { state: n.state, since: t });
        r.rates = nodeRates(n, r.hist, sample);
        const add = (a, b) => b === null ? a : (a === null ? b : a + b);
        const worst = (a, b) => b === null ? a : (a === null ? b : Math.max(a, b));
        writes = add(writes, r.rates.write);
        reads = add(reads, r.rates.read);
        errs = add(errs, r.rates.errorRate);
        timeouts = add(timeouts, r.rates.timeouts);
        unavailables = add(unavailables, r.rates.unavailables);
        writeP99 = worst(writeP99, r.rates.writeP99);
        readP99 = worst(readP99, r.rates.readP99);
        if (r.rates.writeP99 !== null) pushKeyed(history.writeP99, n.host_id, sample, r.rates.writeP99 / 1000);
        if (r.rates.readP99 !== null) pushKeyed(history.readP99, n.host_id, sample, r.rates.readP99 / 1000);
        if (ok(r.compactions)) {
          compactions += r.compactions.pending_tasks;
          pushKeyed(history.compactions, n.host_id, sample, r.compactions.pending_tasks);
        }
        if (ok(r.hints)) {
          hints += r.hints.total_bytes;
          pushKeyed(history.hints, n.host_id, sample, r.hints.total_bytes);
        }
        if (ok(r.netstats)) streams += r.netstats.sessions.filter(x => x.state === "running").length;
      }
      if (writes !== null) push(history.writes, sample, writes);
      if (reads !== null) push(history.reads, sample, reads);
      if (errs !== null) push(history.errors, sample, errs);

      const up = nodes.filter(n => n.state.startsWith("U")).length;
      const upEl = document.getElementById("nodes-up");
      upEl.dataset.up = String(up);
      upEl.dataset.total = String(nodes.length);
      upEl.textContent = `${up} / ${nodes.length}`;
      setTile("write-rate", writes, rate(writes));
      setTile("read-rate", reads, rate(reads));
      setTile("write-p99", writeP99, millis(writeP99));
      setTile("read-p99", readP99, millis(readP99));
      const errEl = document.getElementById("errors");
      errEl.dataset.timeouts = timeouts === null ? "" : String(timeouts);
      errEl.dataset.unavailables = unavailables === null ? "" : String(unavailables);
      errEl.textContent = timeouts === null ? "no data" : `${timeouts} / ${unavailables}`;
      setTile("pending-compactions", compactions, String(compactions));
      setTile("hints-pending", hints, bytes(hints));
      setTile("streams-running", streams, String(streams));

      renderNodes(nodes, per);
      renderStreams(nodes, per);
      renderRepairs(nodes, per);
      drawCharts(nodes, sample);
      polls++;
      const upd = document.getElementById("updated");
      upd.dataset.polls = String(polls);
      upd.dataset.updated = String(sample);
      upd.textContent = `updated ${new Date(sample).toLocaleTimeString()}`;
    } finally {
      busy = false;
    }
  }

  poll();
  setInterval(poll, POLL_MS);
})();
