// gaspard's browser view. Every string that comes from the trace reaches the
// page through textContent or canvas text, never through HTML markup.
"use strict";
(function () {
  const COLORS = ["#dddddd", "#e6550d", "#31a354", "#fdae6b", "#9e9ac8", "#bdbdbd",
    "#fdd0a2", "#6baed6", "#e377c2"];
  const LABEL_W = 190;
  const ROW_H = 46;
  const LANE_H = 9;
  const LANES_SHOWN = 4;

  const embedded = document.getElementById("gaspard-data");
  const state = {
    served: !embedded,
    summary: null,
    report: null,      // the report's summary, once known
    coarse: null,      // embedded timeline (file mode)
    data: null,        // timeline now shown
    t0: 0, t1: 1,
    selected: null,    // {row, span}
    pending: 0,
  };
  window.gaspard = state;

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else e.setAttribute(k, v);
    }
    for (const c of children) {
      if (c == null) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  // `n` and its noun: `one` for 1, `many` for any other count.
  function count(n, one, many) {
    return n === 1 ? "1 " + one : n + " " + many;
  }

  function ns(v) {
    if (v == null) return "";
    const a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toFixed(3) + " s";
    if (a >= 1e6) return (v / 1e6).toFixed(3) + " ms";
    if (a >= 1e3) return (v / 1e3).toFixed(2) + " us";
    return Math.round(v) + " ns";
  }

  async function getJSON(url) {
    const r = await fetch(url);
    if (!r.ok) throw new Error(url + ": " + r.status);
    return r.json();
  }

  // ---------------------------------------------------------------- timeline
  const canvas = document.getElementById("timeline");
  const ctx = canvas.getContext("2d");

  function plotWidth() { return Math.max(100, canvas.width - LABEL_W); }
  function xOf(t) { return LABEL_W + (t - state.t0) / (state.t1 - state.t0) * plotWidth(); }
  function tOf(x) { return state.t0 + (x - LABEL_W) / plotWidth() * (state.t1 - state.t0); }

  function resize() {
    const box = document.getElementById("timeline-box");
    const rows = state.summary ? state.summary.rows.length : 1;
    canvas.width = Math.max(400, box.clientWidth);
    canvas.height = Math.max(60, rows * ROW_H + 20);
  }

  // File mode: the view of [t0, t1) from the embedded coarse timeline.
  function fromCoarse(t0, t1, width) {
    const c = state.coarse;
    const threads = c.threads.map((th) => {
      const n = th.cls.length;
      const span = c.t1 - c.t0;
      const cls = [], busy = [];
      for (let x = 0; x < width; x++) {
        const a = t0 + (t1 - t0) * x / width;
        const i = Math.floor((a - c.t0) / span * n);
        const ok = i >= 0 && i < n;
        cls.push(ok ? th.cls[i] : 0);
        busy.push(ok ? th.busy[i] : 0);
      }
      const spans = th.spans.filter((s) => s[1] >= t0 && s[0] < t1);
      return { name: th.name, cls, busy, complete: th.complete, lanes: th.lanes, spans };
    });
    return { t0, t1, width, threads };
  }

  let fetchTimer = null;
  function setView(t0, t1) {
    const lo = state.summary.span[0], hi = state.summary.span[1];
    const minSpan = 100;
    if (t1 - t0 < minSpan) { const m = (t0 + t1) / 2; t0 = m - minSpan / 2; t1 = m + minSpan / 2; }
    if (t1 - t0 > hi - lo) { t0 = lo; t1 = hi; }
    if (t0 < lo) { t1 += lo - t0; t0 = lo; }
    if (t1 > hi) { t0 -= t1 - hi; t1 = hi; }
    state.t0 = Math.round(t0); state.t1 = Math.round(t1);
    canvas.dataset.t0 = String(state.t0);
    canvas.dataset.t1 = String(state.t1);
    document.getElementById("tl-range").textContent =
      ns(state.t0 - lo) + " to " + ns(state.t1 - lo) + " (" + ns(state.t1 - state.t0) + " shown)";
    draw();
    if (state.served) {
      clearTimeout(fetchTimer);
      fetchTimer = setTimeout(loadWindow, 40);
    } else {
      state.data = fromCoarse(state.t0, state.t1, plotWidth());
      canvas.dataset.loaded = String(state.t0) + "-" + String(state.t1);
      draw();
    }
  }

  async function loadWindow() {
    const t0 = state.t0, t1 = state.t1;
    state.pending++;
    try {
      const d = await getJSON("/api/timeline?t0=" + t0 + "&t1=" + t1 + "&width=" + plotWidth());
      if (d.stage && d.stage !== state.summary.stage) {
        // The server has moved on (from the view index's timeline to the
        // quick scan's, from that to the whole trace's): its names and
        // callsites come with its core, the report stays.
        const core = await getJSON("/api/core");
        if (core.stage === d.stage) {
          state.summary = state.report ? Object.assign({}, state.report, core) : core;
          state.selected = null;
          renderLegend(state.summary);
          resize();
        }
        clearTimeout(fetchTimer);
        fetchTimer = setTimeout(loadWindow, 100);
        return;
      }
      if (t0 === state.t0 && t1 === state.t1) {
        state.data = d;
        canvas.dataset.loaded = String(t0) + "-" + String(t1);
        draw();
      }
    } finally {
      state.pending--;
    }
  }

  function draw() {
    const W = canvas.width, H = canvas.height;
    ctx.clearRect(0, 0, W, H);
    const s = state.summary;
    if (!s) return;
    ctx.font = "12px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    s.rows.forEach((name, r) => {
      const y = r * ROW_H;
      ctx.fillStyle = r % 2 ? "#f4f4f4" : "#fff";
      ctx.fillRect(0, y, W, ROW_H);
      ctx.fillStyle = "#222";
      ctx.fillText(name.length > 30 ? name.slice(0, 29) + "\u2026" : name, 4, y + ROW_H / 2, LABEL_W - 8);
    });
    const d = state.data;
    if (!d || d.t0 !== state.t0 || d.t1 !== state.t1) {
      drawStale(d);
      return;
    }
    const arrows = [];
    d.threads.forEach((th, r) => {
      const y = r * ROW_H;
      if (!th.complete) {
        // Summary columns: the busy share of each pixel, in its main class.
        const w = plotWidth() / th.cls.length;
        for (let x = 0; x < th.cls.length; x++) {
          if (!th.busy[x]) continue;
          const h = (ROW_H - 6) * th.busy[x] / 255;
          ctx.fillStyle = COLORS[th.cls[x]] || "#888";
          ctx.fillRect(LABEL_W + x * w, y + ROW_H - 3 - h, Math.max(1, w), h);
        }
      }
      for (const sp of th.spans) {
        const x0 = Math.max(LABEL_W, xOf(sp[0]));
        const x1 = Math.min(W, xOf(sp[1]));
        const lane = Math.min(sp[3], LANES_SHOWN - 1);
        ctx.fillStyle = COLORS[sp[2]] || "#888";
        ctx.fillRect(x0, y + 3 + lane * (LANE_H + 1), Math.max(1, x1 - x0), LANE_H);
        if (sp[7] >= 0 && arrows.length < 3000) arrows.push([r, sp]);
      }
    });
    ctx.strokeStyle = "rgba(0,0,0,0.55)";
    ctx.fillStyle = "rgba(0,0,0,0.55)";
    for (const [r, sp] of arrows) {
      const xa = xOf(sp[0]), xb = xOf(sp[1]);
      const ya = r * ROW_H + ROW_H / 2, yb = sp[7] * ROW_H + ROW_H / 2;
      if (sp[7] === r) continue;
      ctx.beginPath(); ctx.moveTo(xa, ya); ctx.lineTo(xb, yb); ctx.stroke();
      const ang = Math.atan2(yb - ya, xb - xa);
      ctx.beginPath();
      ctx.moveTo(xb, yb);
      ctx.lineTo(xb - 7 * Math.cos(ang - 0.4), yb - 7 * Math.sin(ang - 0.4));
      ctx.lineTo(xb - 7 * Math.cos(ang + 0.4), yb - 7 * Math.sin(ang + 0.4));
      ctx.fill();
    }
    if (state.selected) {
      const { row, span } = state.selected;
      const x0 = xOf(span[0]), x1 = xOf(span[1]);
      ctx.strokeStyle = "#000";
      ctx.lineWidth = 2;
      ctx.strokeRect(Math.max(LABEL_W, x0) - 1, row * ROW_H + 1, Math.max(3, x1 - x0) + 2, ROW_H - 2);
      ctx.lineWidth = 1;
    }
  }

  function drawStale(d) {
    ctx.fillStyle = "#999";
    ctx.fillText(d ? "loading\u2026" : "", LABEL_W + 4, 10);
  }

  function hit(x, y) {
    const d = state.data;
    if (!d) return null;
    const r = Math.floor(y / ROW_H);
    const th = d.threads[r];
    if (!th) return null;
    const t = tOf(x);
    const slop = (state.t1 - state.t0) / plotWidth() * 2;
    const lane = Math.floor((y - r * ROW_H - 3) / (LANE_H + 1));
    // The span drawn in the lane clicked, else the innermost one at that time.
    let best = null, inLane = null;
    for (const sp of th.spans) {
      if (sp[0] - slop <= t && t <= sp[1] + slop) {
        if (!best || sp[3] > best[3]) best = sp;
        if (Math.min(sp[3], LANES_SHOWN - 1) === lane && (!inLane || sp[3] > inLane[3])) inLane = sp;
      }
    }
    best = inLane || best;
    return best ? { row: r, span: best } : null;
  }

  async function select(row, span) {
    state.selected = { row, span };
    draw();
    const s = state.summary;
    // A window read from the trace (before its spans are all known) names
    // its spans and callsites itself.
    const tables = state.data && state.data.names ? state.data : s;
    const box = document.getElementById("details");
    const site = tables.sites[span[5]] || [null, 0];
    const where = site[0] ? site[0] + ":" + site[1] : "unknown source position";
    box.replaceChildren(
      el("div", { class: "d-name", text: tables.names[span[4]] }),
      el("div", { text: s.rows[row] }),
      el("div", { text: "from " + ns(span[0] - s.span[0]) + ", lasts " + ns(span[1] - span[0]) }),
      el("div", { class: "d-where", text: where }),
    );
    if (span[7] >= 0) box.append(el("div", { text: "other side: " + s.rows[span[7]] }));
    const text = tables === s && s.site_lines ? s.site_lines[span[5]] : null;
    if (text != null && !state.served) box.append(el("pre", { class: "d-line", text: String(site[1]).padStart(5) + "  " + text }));
    box.dataset.row = String(row);
    box.dataset.event = String(span[6]);
    if (!state.served) return;
    try {
      // Read on demand (its process alone) while the spans are a quick scan's.
      const r = await fetch("/api/event?row=" + row + "&event=" + span[6]);
      if (state.selected.span !== span) return;
      if (!r.ok) {
        let why = String(r.status);
        try {
          const j = await r.json();
          why = j.error || (j.loading ? "the trace is still being read" : why);
        } catch (e) { /* not JSON */ }
        box.append(el("div", { class: "d-args", text: "its arguments are not shown: " + why }));
        return;
      }
      const ev = await r.json();
      const args = Object.assign({}, ev);
      delete args.source;
      box.append(el("div", { class: "d-args", text: JSON.stringify(args) }));
      if (ev.source) {
        const pre = el("pre", { class: "d-source" });
        ev.source.lines.forEach((l, i) => {
          const n = ev.source.first + i;
          const line = el("span", { text: String(n).padStart(5) + "  " + l + "\n" });
          if (n === ev.line) line.className = "hl";
          pre.append(line);
        });
        box.append(pre);
      }
    } catch (e) {
      box.append(el("div", { text: String(e) }));
    }
  }

  let drag = null;
  canvas.addEventListener("mousedown", (e) => { drag = { x: e.offsetX, t0: state.t0, t1: state.t1, moved: false }; });
  window.addEventListener("mouseup", (e) => {
    if (drag && !drag.moved && e.target === canvas) {
      const h = hit(e.offsetX, e.offsetY);
      if (h) select(h.row, h.span);
    }
    drag = null;
  });
  canvas.addEventListener("mousemove", (e) => {
    if (!drag) return;
    const dx = e.offsetX - drag.x;
    if (Math.abs(dx) > 2) drag.moved = true;
    if (!drag.moved) return;
    const dt = dx / plotWidth() * (drag.t1 - drag.t0);
    setView(drag.t0 - dt, drag.t1 - dt);
  });
  canvas.addEventListener("wheel", (e) => {
    e.preventDefault();
    const t = tOf(Math.max(LABEL_W, e.offsetX));
    zoomAround(t, e.deltaY < 0 ? 0.8 : 1.25);
  }, { passive: false });

  function zoomAround(t, f) {
    setView(t - (t - state.t0) * f, t + (state.t1 - t) * f);
  }
  document.getElementById("zoom-in").onclick = () => zoomAround((state.t0 + state.t1) / 2, 0.5);
  document.getElementById("zoom-out").onclick = () => zoomAround((state.t0 + state.t1) / 2, 2);
  document.getElementById("zoom-reset").onclick = () => setView(state.summary.span[0], state.summary.span[1]);

  // Shows the place of finding i: zooms there and selects its span.
  async function goToFinding(i) {
    const p = state.summary.finding_places[i];
    if (!p || p.row == null) return;
    const pad = Math.max((p.t1 - p.t0) * 0.5, 1000);
    setView(p.t0 - pad, p.t1 + pad);
    document.getElementById("timeline-section").scrollIntoView();
    if (state.served) await loadWindow();
    const th = state.data && state.data.threads[p.row];
    const sp = th && th.spans.find((s) => s[6] === p.event);
    if (sp) select(p.row, sp);
  }

  async function showSource(file, line) {
    const pre = document.getElementById("source-view");
    pre.hidden = false;
    pre.replaceChildren(el("span", { text: file + ":" + line + "\n" }));
    if (!state.served) {
      const s = state.summary;
      const i = s.sites.findIndex((c) => c[0] != null && c[1] === line && (c[0] === file || c[0].endsWith("/" + file)));
      if (i >= 0 && s.site_lines[i] != null) pre.append(el("span", { class: "hl", text: String(line).padStart(5) + "  " + s.site_lines[i] + "\n" }));
      return;
    }
    try {
      const src = await getJSON("/api/source?file=" + encodeURIComponent(file));
      src.text.split("\n").forEach((l, i) => {
        const s = el("span", { text: String(i + 1).padStart(5) + "  " + l + "\n" });
        if (i + 1 === line) s.className = "hl";
        pre.append(s);
      });
      const hl = pre.querySelector(".hl");
      if (hl) pre.scrollTop = hl.offsetTop - pre.offsetTop - 40;
    } catch (e) {
      pre.append(el("span", { text: "source not available" }));
    }
  }

  // ---------------------------------------------------------------- findings
  function renderFindings(s) {
    const ol = document.getElementById("findings");
    if (!s.findings.length) ol.append(el("li", { text: "none" }));
    s.findings.forEach((f, i) => {
      const li = el("li", { class: "finding", "data-kind": f.kind },
        el("span", { class: "sev", text: (f.severity * 100).toFixed(1) + "% " }),
        el("span", { class: "kind", text: f.kind + ": " }),
        el("span", { class: "msg", text: f.message }));
      const go = el("button", { class: "place", type: "button", text: "show in timeline" });
      go.onclick = () => goToFinding(i);
      li.append(go);
      if (f.location) {
        const src = el("button", { class: "src", type: "button", text: f.location.file + ":" + f.location.line });
        src.onclick = () => showSource(f.location.file, f.location.line);
        li.append(src);
      }
      ol.append(li);
    });
  }

  // ------------------------------------------------------------------ gauges
  function gauge(parts) {
    const g = el("div", { class: "gauge" });
    for (const [cls, v, total, label] of parts) {
      const w = total > 0 ? (100 * v / total) : 0;
      const s = el("span", { class: cls, title: label + " " + w.toFixed(1) + "%" });
      s.style.width = w + "%";
      g.append(s);
    }
    return g;
  }

  function renderGauges(s) {
    const t = document.getElementById("gauges");
    t.append(el("tr", {}, ...["thread", "compute / sync / communication", "parallel / sequential",
      "active", "compute", "sync", "communication", "parallel"].map((h) => el("th", { text: h }))));
    s.breakdown.forEach((b, i) => {
      const total = b.compute_ns + b.sync_ns + b.comm_ns;
      t.append(el("tr", { "data-row": String(i) },
        el("td", { class: "name", text: s.rows[i] || (b.process + " stream " + b.stream) }),
        el("td", {}, gauge([["g-compute", b.compute_ns, total, "compute"], ["g-sync", b.sync_ns, total, "sync"],
          ["g-comm", b.comm_ns, total, "communication"]])),
        el("td", {}, gauge([["g-par", b.parallel_ns, b.span_ns, "parallel"],
          ["g-seq", Math.max(0, b.span_ns - b.parallel_ns), b.span_ns, "sequential"]])),
        el("td", { text: ns(b.span_ns) }), el("td", { text: ns(b.compute_ns) }),
        el("td", { text: ns(b.sync_ns) }), el("td", { text: ns(b.comm_ns) }),
        el("td", { text: ns(b.parallel_ns) })));
    });
  }

  // ------------------------------------------------------------------ matrix
  function renderMatrix(s) {
    const sel = document.getElementById("matrix-model");
    const metric = document.getElementById("matrix-metric");
    const table = document.getElementById("matrix");
    if (!s.communication.length) {
      document.getElementById("matrix-section").append(el("p", { text: "no MPI or OpenSHMEM communication" }));
      sel.hidden = metric.hidden = true;
      return;
    }
    s.communication.forEach((m, i) => sel.append(el("option", { value: String(i), text: m.model })));
    function show() {
      const m = s.communication[+sel.value];
      const key = metric.value;
      const cells = m[key];
      const max = Math.max(1, ...cells.flat());
      table.replaceChildren();
      table.dataset.model = m.model;
      table.dataset.metric = key;
      table.append(el("tr", {}, el("th", { text: "from \\ to" }),
        ...cells.map((_, j) => el("th", { text: String(j) }))));
      cells.forEach((row, i) => {
        table.append(el("tr", {}, el("th", { text: String(i) }), ...row.map((v, j) => {
          const td = el("td", { "data-from": String(i), "data-to": String(j), text: String(v) });
          const a = v / max;
          td.style.background = "rgba(230, 85, 13, " + a.toFixed(3) + ")";
          if (a > 0.6) td.style.color = "#fff";
          return td;
        })));
      });
    }
    sel.onchange = show;
    metric.onchange = show;
    show();
  }

  // ------------------------------------------------------------------ blocks
  function renderBlocks(s) {
    const sel = document.getElementById("blocks-object");
    const range = document.getElementById("blocks-epoch");
    const box = document.getElementById("blocks");
    const objects = s.blocks.objects;
    if (!objects.length) {
      box.append(el("p", { text: "no accesses to shared objects" }));
      return;
    }
    objects.forEach((o, i) => sel.append(el("option", { value: String(i), text: o.name + " (" + o.model + ", " + o.size + " bytes)" })));
    const fs = new Set(s.blocks.false_sharing.map((b) => b.object + "/" + b.home + "/" + b.block));
    function show() {
      const obj = +sel.value;
      const mine = s.block_epochs.filter((e) => e.object === obj);
      const epochs = [...new Set(mine.map((e) => e.epoch))].sort((a, b) => a - b);
      range.max = String(Math.max(0, epochs.length - 1));
      if (+range.value > epochs.length - 1) range.value = "0";
      const epoch = epochs[+range.value];
      document.getElementById("blocks-epoch-label").textContent =
        epochs.length ? epoch + " (" + (+range.value + 1) + " of " + epochs.length + " with accesses)" : "none";
      const o = objects[obj];
      const nblocks = Math.min(512, Math.max(1, Math.ceil(o.size / s.blocks.block_size)));
      const here = new Map(mine.filter((e) => e.epoch === epoch).map((e) => [e.home + "/" + e.block, e]));
      box.replaceChildren();
      for (let h = 0; h < o.ranks; h++) {
        const row = el("div", { class: "brow" }, el("span", { class: "home", text: "home " + h }));
        for (let b = 0; b < nblocks; b++) {
          const e = here.get(h + "/" + b);
          const c = el("span", { class: "blk", "data-home": String(h), "data-block": String(b) });
          if (e) {
            c.classList.add(e.writers.length > 1 ? "b-wm" : e.writers.length ? "b-w1" : "b-r");
            c.title = "block " + b + ": readers " + e.readers.map((r) => s.blocks.threads[r]).join(", ") +
              "; writers " + e.writers.map((r) => s.blocks.threads[r]).join(", ");
            c.onclick = () => { document.getElementById("block-details").textContent = c.title; };
          }
          if (fs.has(obj + "/" + h + "/" + b)) c.classList.add("b-fs");
          row.append(c);
        }
        box.append(row);
      }
    }
    sel.onchange = () => { range.value = "0"; show(); };
    range.oninput = show;
    show();
  }

  // ----------------------------------------------------------------- profile
  function sortable(table, headers, rows) {
    let key = null, asc = false;
    function fill() {
      table.replaceChildren(el("tr", {}, ...headers.map((h, i) => {
        const th = el("th", { class: i < 2 ? "name" : "", text: h[0] + (key === i ? (asc ? " \u25b2" : " \u25bc") : "") });
        th.onclick = () => { asc = key === i ? !asc : false; key = i; sort(); fill(); };
        return th;
      })));
      for (const r of rows) {
        table.append(el("tr", {}, ...headers.map((h, i) =>
          el("td", { class: h[2] ? "name" : "", "data-value": String(r[i]), text: h[1](r[i]) }))));
      }
    }
    function sort() {
      rows.sort((a, b) => {
        const x = a[key], y = b[key];
        const c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
        return asc ? c : -c;
      });
    }
    fill();
  }

  function renderProfiles(s) {
    const id = (v) => String(v == null ? "" : v);
    const stats = [["count", id], ["total", ns], ["mean", ns], ["min", ns], ["max", ns], ["bytes", id]];
    sortable(document.getElementById("profile-events"), [["event", id, true], ...stats],
      s.by_event.map((e) => [e.name, e.count, e.total_ns, e.mean_ns, e.min_ns, e.max_ns, e.bytes]));
    sortable(document.getElementById("profile-sites"), [["event", id, true], ["where", id, true], ...stats],
      s.by_callsite.map((e) => [e.name, (e.file || "?") + ":" + e.line, e.count, e.total_ns, e.mean_ns, e.min_ns, e.max_ns, e.bytes]));
  }

  // ------------------------------------------- load balance, waits and locks
  // A sortable table of `rows`, or a line saying there is none.
  function tableOrNone(id, headers, rows, none) {
    const table = document.getElementById(id);
    if (!rows.length) {
      table.replaceWith(el("p", { id: id, class: "none", text: none }));
      return;
    }
    sortable(table, headers, rows);
  }

  function renderBalance(s) {
    const id = (v) => String(v == null ? "" : v);
    const pct = (v) => (100 * v).toFixed(1) + "%";
    const at = (l) => (l ? l.file + ":" + l.line : "?");
    const box = document.getElementById("barrier-groups");
    if (!s.balance.barriers.length) box.append(el("p", { class: "none", text: "no barriers met by two threads or more" }));
    s.balance.barriers.forEach((g) => {
      box.append(el("p", { class: "group", text: count(g.threads.length, "thread", "threads") + ", " + count(g.epochs, "barrier", "barriers") + ": arrivals spread " +
        ns(g.mean_spread_ns) + " on average, " + ns(g.max_spread_ns) + " at most" }));
      const t = el("table", { class: "data sortable" });
      box.append(t);
      sortable(t, [["thread", id, true], ["last at", id], ["waiting", ns]],
        g.threads.map((name, i) => [name, g.last_arrivals[i], g.wait_ns[i]]));
    });
    tableOrNone("regions", [["construct or region", id, true], ["where", id, true], ["threads", id], ["mean", ns],
      ["max", ns], ["slowest", id, true], ["imbalance", pct]],
      s.balance.regions.map((r) => [r.name, at(r.location), r.threads, r.mean_ns, r.max_ns, r.slowest, r.imbalance]),
      "no construct or region run by two threads or more");
  }

  function renderWaits(s) {
    const id = (v) => String(v == null ? "" : v);
    const pct = (v) => (100 * v).toFixed(1) + "%";
    const at = (l) => (l ? l.file + ":" + l.line : "?");
    tableOrNone("waits", [["pattern", id, true], ["call", id, true], ["where", id, true], ["calls", id], ["waits", id],
      ["waited", ns], ["longest", ns], ["threads", id], ["share of their time", pct]],
      s.waits.filter((w) => w.wait_ns > 0).map((w) => [w.pattern, w.call + (w.within ? " within " + w.within : ""),
        at(w.location), w.calls, w.waits, w.wait_ns, w.max_ns, w.threads.length, w.share]),
      "no thread waited in a blocking call, a fence or a one-sided synchronization");
    tableOrNone("locks", [["lock", id, true], ["where", id, true], ["acquisitions", id], ["contended", id],
      ["waiting", ns], ["held", (v) => (v == null ? "not recorded" : ns(v))], ["threads", id], ["waiters", id]],
      s.locks.map((l) => [l.lock, at(l.location), l.acquisitions, l.contended, l.wait_ns, l.hold_ns,
        l.threads.length, l.waiters]),
      "no lock taken");
  }

  function renderLegend(s) {
    const box = document.getElementById("legend");
    box.replaceChildren();
    s.classes.forEach((c, i) => {
      const sw = el("i");
      sw.style.background = COLORS[i];
      box.append(el("span", { class: "legend-item" }, sw, c));
    });
  }

  function renderAll(s) {
    document.getElementById("trace-name").textContent = s.trace;
    document.getElementById("trace-stats").textContent =
      count(s.events, "event", "events") + ", " + count(s.threads, "thread", "threads") + ", " +
      count(s.processes, "process", "processes") +
      (s.lost_events ? ", " + s.lost_events + " lost" : "");
    if (s.note) {
      const note = document.getElementById("note");
      note.textContent = s.note;
      note.hidden = false;
    }
    renderFindings(s);
    renderGauges(s);
    renderBalance(s);
    renderWaits(s);
    renderMatrix(s);
    renderBlocks(s);
    renderProfiles(s);
    if (s.problems.length) {
      document.getElementById("problems-section").hidden = false;
      const ul = document.getElementById("problems");
      s.problems.forEach((p) => ul.append(el("li", { text: p })));
    }
  }

  // The served summary: the server answers 503 while it computes the report.
  async function summaryWhenReady() {
    const stats = document.getElementById("trace-stats");
    for (;;) {
      const r = await fetch("/api/summary");
      if (r.ok) return r.json();
      if (r.status !== 503) {
        let why = String(r.status);
        try { why = (await r.json()).error || why; } catch (e) { /* not JSON */ }
        throw new Error(why);
      }
      const stage = state.summary && state.summary.stage;
      stats.textContent = stage === "quick"
        ? "timeline from a quick scan; reading the whole trace\u2026"
        : stage === "index"
          ? "timeline from the view index; reading the whole trace\u2026"
          : stage === "overview"
            ? "timeline from an overview of every event; reading the whole trace\u2026"
          : "analysing the trace\u2026";
      await new Promise((ok) => setTimeout(ok, 300));
    }
  }

  // Served: until the whole trace's timeline is shown, whether the server
  // has moved on (to the quick scan's, to the whole trace's); the page then
  // asks for the view again, and takes the new stage's core with it.
  async function followStages() {
    // With a note, the whole trace is not read (too big): the stage stays.
    while (state.summary.stage !== "full" && !state.summary.note) {
      await new Promise((ok) => setTimeout(ok, 1000));
      try {
        const d = await getJSON("/api/timeline?t0=" + state.t0 + "&t1=" + state.t1 + "&width=1");
        if (d.stage && d.stage !== state.summary.stage) setView(state.t0, state.t1);
      } catch (e) {
        return;
      }
    }
  }

  async function start() {
    try {
      // The timeline first (from the server, as soon as the trace is read),
      // the report's views when it is ready.
      let summary;
      if (state.served) {
        state.summary = await getJSON("/api/core");
      } else {
        const d = JSON.parse(embedded.textContent);
        state.summary = summary = d.summary;
        state.coarse = d.timeline;
      }
      renderLegend(state.summary);
      resize();
      setView(state.summary.span[0], state.summary.span[1]);
      window.addEventListener("resize", () => { resize(); setView(state.t0, state.t1); });
      if (state.served) summary = await summaryWhenReady();
      const moved = state.summary.stage !== summary.stage;
      state.report = summary;
      state.summary = summary;
      renderAll(summary);
      if (moved) {
        state.selected = null;
        renderLegend(summary);
        resize();
        setView(state.t0, state.t1);
      }
      document.body.dataset.ready = "1";
      if (state.served) followStages();
    } catch (e) {
      document.body.dataset.ready = "error";
      document.querySelector("main").prepend(el("p", { class: "error", text: "cannot load the trace: " + e }));
    }
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
