// The Wurk dashboard's pages, drawn from the JSON API in the browser.
//
// Every value is written with textContent or as an attribute through el(),
// never as markup, so a job argument such as "<script>" shows as text. Times
// arrive as epoch seconds and are shown in the viewer's own time zone.
// Changes are POSTs with a JSON body, which the server accepts only from this
// origin; in read-only mode the controls that change anything are not drawn.
"use strict";

const body = document.body;
const READ_ONLY = body.dataset.readOnly === "1";
const POLL_MS = (parseFloat(body.dataset.poll) || 2) * 1000;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Replace a node's children; nested lists are flattened and empty parts dropped.
function fill(node, ...children) {
  node.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false && c !== ""));
}

async function api(path, options) {
  const init = { credentials: "same-origin", headers: { Accept: "application/json" } };
  if (options && options.method) {
    init.method = options.method;
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(options.body || {});
  }
  const response = await fetch(path, init);
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

const post = (path, data) => api(path, { method: "POST", body: data });
const q = encodeURIComponent;

function when(seconds) {
  if (seconds === null || seconds === undefined) return "";
  return new Date(seconds * 1000).toLocaleString();
}

function timeCell(seconds) {
  if (seconds === null || seconds === undefined) return el("td", {}, "");
  const date = new Date(seconds * 1000);
  return el("td", {}, el("time", { datetime: date.toISOString(), title: date.toString() }, date.toLocaleString()));
}

function duration(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

const number = (n) => Number(n || 0).toLocaleString();
// "1 job", "1,234 jobs": a count with its noun, in the plural unless it is one.
const count = (n, noun, nouns) => `${number(n)} ${Number(n) === 1 ? noun : nouns || `${noun}s`}`;
const short = (value, size) => {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text && text.length > size ? text.slice(0, size - 1) + "…" : text;
};

function notice(view, message, kind) {
  const old = view.querySelector(".notice");
  if (old) old.remove();
  view.prepend(el("p", { class: `notice ${kind || ""}`, role: kind === "error" ? "alert" : "status" }, message));
}

function button(label, handler, options) {
  const opts = options || {};
  return el("button", { type: "button", class: opts.danger ? "danger" : null, "data-change": opts.change ? "1" : null, onclick: handler }, label);
}

// A control that changes something: absent in read-only mode; asks first when
// destructive (`confirm`, a question or a function of the ticked rows); then
// says what it did, in the sentence the server answers with ("message"). With
// `pick` (from selectable()), it acts on the ticked rows, given to `run`, and
// says so when none is ticked rather than sending an empty change.
function action(view, label, run, options) {
  if (READ_ONLY) return null;
  const opts = { ...(options || {}), change: true };
  return button(label, async () => {
    const chosen = opts.pick ? opts.pick.chosen() : undefined;
    if (chosen && !chosen.length) {
      notice(view, "Nothing is selected: tick the rows to act on first.");
      return;
    }
    const question = typeof opts.confirm === "function" ? opts.confirm(chosen) : opts.confirm;
    if (question && !window.confirm(question)) return;
    try {
      const result = await run(chosen);
      if (opts.after) await opts.after(result);
      if (result && typeof result.message === "string") notice(view, result.message);
    } catch (error) {
      notice(view, error.message, "error");
    }
  }, opts);
}

// A message for the next page this tab shows, for an action that leaves the
// page it was started on (a job's detail, back to its list): kept in the tab's
// sessionStorage, never in the address, so no link can make the dashboard say
// something.
const CARRIED = "wurk-dashboard-notice";

function carry(message) {
  try { window.sessionStorage.setItem(CARRIED, message); } catch (error) { /* storage off: no message */ }
}

function carried() {
  try {
    const message = window.sessionStorage.getItem(CARRIED);
    window.sessionStorage.removeItem(CARRIED);
    return message;
  } catch (error) {
    return null;
  }
}

function table(headers, rows, caption) {
  return el("div", { class: "table-wrap" },
    el("table", {},
      caption ? el("caption", {}, caption) : null,
      el("thead", {}, el("tr", {}, headers.map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: headers.length, class: "empty" }, "Nothing here.")))));
}

function cards(items) {
  return el("dl", { class: "cards" }, items.map(([label, value, href]) =>
    el("div", { class: "card" }, el("dt", {}, label), el("dd", {}, href ? el("a", { href }, value) : value))));
}

// A line chart of named series over the same x positions, as inline SVG.
function chart(title, labels, series) {
  const width = 640, height = 160, pad = 4;
  const all = series.flatMap((s) => s.values);
  const top = Math.max(1, ...all);
  const svgNS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(svgNS, "svg");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", title);
  series.forEach((s, index) => {
    const step = s.values.length > 1 ? (width - 2 * pad) / (s.values.length - 1) : 0;
    const points = s.values.map((v, i) => `${pad + i * step},${height - pad - (v / top) * (height - 2 * pad)}`);
    const line = document.createElementNS(svgNS, "polyline");
    line.setAttribute("points", points.join(" "));
    line.setAttribute("class", `series series-${index}`);
    svg.append(line);
  });
  const legend = el("p", { class: "legend" }, series.map((s, index) =>
    el("span", { class: `key key-${index}` }, `${s.name}: ${number(s.values[s.values.length - 1])}`)));
  const range = labels.length ? el("p", { class: "range" }, `${labels[0]} – ${labels[labels.length - 1]}`) : null;
  return el("figure", { class: "chart" }, el("figcaption", {}, title), svg, legend, range);
}

// -- Dashboard -----------------------------------------------------------------

async function dashboardView(view) {
  const live = { processed: [], failed: [], labels: [] };
  const numbers = el("div", { class: "numbers" });
  const liveChart = el("div", {});
  const history = el("div", {});
  fill(view, numbers, el("h2", {}, "Live"), liveChart, el("h2", {}, "History"), history);
  let previous = null;

  function draw(stats) {
    fill(numbers, cards([
      ["Processed", number(stats.processed)], ["Failed", number(stats.failed)],
      ["Busy", number(stats.busy), "busy"], ["Enqueued", number(stats.enqueued), "queues"],
      ["Latency", duration(stats.latency)], ["Retries", number(stats.retries), "retries"],
      ["Scheduled", number(stats.scheduled), "scheduled"], ["Dead", number(stats.dead), "dead"],
      ["Processes", number(stats.processes), "busy"],
    ]));
    if (previous) {
      live.processed.push(Math.max(0, stats.processed - previous.processed));
      live.failed.push(Math.max(0, stats.failed - previous.failed));
      live.labels.push(new Date(stats.time * 1000).toLocaleTimeString());
      for (const key of ["processed", "failed", "labels"]) live[key].splice(0, live[key].length - 60);
      fill(liveChart, chart("Jobs per poll", live.labels,
        [{ name: "Processed", values: live.processed }, { name: "Failed", values: live.failed }]));
    }
    previous = stats;
  }

  draw(await api("api/stats"));
  fill(liveChart, el("p", { class: "muted" }, "Waiting for the next numbers…"));
  if (window.EventSource) {
    const source = new EventSource("api/stream");
    source.addEventListener("stats", (event) => draw(JSON.parse(event.data)));
    window.addEventListener("pagehide", () => source.close());
  } else {
    setInterval(async () => draw(await api("api/stats")), POLL_MS);
  }
  const days = await api("api/stats/history?days=30");
  const dates = Object.keys(days.processed).reverse();
  fill(history, chart("Processed and failed per day (UTC)", dates, [
    { name: "Processed", values: dates.map((d) => days.processed[d]) },
    { name: "Failed", values: dates.map((d) => days.failed[d]) },
  ]));
}

// -- Busy ------------------------------------------------------------------------

async function busyView(view) {
  const data = await api("api/processes");
  const refresh = () => busyView(view);
  const processRows = data.processes.map((p) => el("tr", {},
    el("td", {}, el("strong", {}, p.identity), p.leader ? el("span", { class: "badge" }, "leader") : null,
      p.stopping ? el("span", { class: "badge warn" }, "quiet") : null,
      p.labels.map((label) => el("span", { class: "badge" }, label))),
    el("td", {}, p.queues.join(", ")),
    el("td", {}, `${number(p.busy)} / ${number(p.concurrency)}`),
    el("td", {}, `${number(Math.round(p.rss_kb / 1024))} MB`),
    timeCell(p.started_at),
    el("td", {}, duration(data.time - p.beat) + " ago"),
    el("td", { class: "actions" },
      p.embedded ? el("span", { class: "muted" }, "embedded") : [
        p.stopping ? null : action(view, "Quiet", () => post("api/processes/quiet", { identity: p.identity }), { after: refresh }),
        action(view, "Stop", () => post("api/processes/stop", { identity: p.identity }),
          { danger: true, confirm: `Stop ${p.identity}?`, after: refresh }),
      ])));
  const jobRows = data.jobs.map((job) => el("tr", {},
    el("td", {}, job.process), el("td", {}, job.thread), el("td", {}, job.queue),
    el("td", {}, job.class), el("td", { class: "args" }, short(job.args, 120)),
    timeCell(job.run_at), el("td", {}, duration(data.time - job.run_at))));
  fill(view,
    table(["Process", "Queues", "Busy", "Memory", "Started", "Heartbeat", ""], processRows, "Processes"),
    table(["Process", "Thread", "Queue", "Job", "Arguments", "Started", "Elapsed"], jobRows, "Running jobs"));
}

// -- Queues ----------------------------------------------------------------------

async function queuesView(view) {
  const data = await api("api/queues");
  const refresh = () => queuesView(view);
  const rows = data.queues.map((queue) => el("tr", {},
    el("td", {}, el("a", { href: `queues/${q(queue.name)}` }, queue.name),
      queue.paused ? el("span", { class: "badge warn" }, "paused") : null),
    el("td", { class: "num" }, number(queue.size)),
    el("td", { class: "num" }, duration(queue.latency)),
    el("td", { class: "actions" },
      queue.paused
        ? action(view, "Unpause", () => post(`api/queues/${q(queue.name)}/unpause`), { after: refresh })
        : action(view, "Pause", () => post(`api/queues/${q(queue.name)}/pause`), { after: refresh }),
      action(view, "Clear", () => post(`api/queues/${q(queue.name)}/clear`),
        { danger: true, confirm: `Delete every job in ${queue.name}?`, after: refresh }))));
  fill(view, table(["Queue", "Size", "Latency", ""], rows));
}

function selectable(rows, keyOf) {
  const boxes = [];
  const all = el("input", { type: "checkbox", "aria-label": "Select all on this page",
    onchange: () => boxes.forEach((box) => { box.checked = all.checked; }) });
  const cell = (row) => {
    const box = el("input", { type: "checkbox", value: keyOf(row), "aria-label": "Select" });
    boxes.push(box);
    return el("td", {}, box);
  };
  return { all, cell, chosen: () => boxes.filter((box) => box.checked).map((box) => box.value) };
}

async function queueView(view, params, cursor) {
  const name = params.name;
  document.querySelector("h1").textContent = `Queue ${name}`;
  const data = await api(`api/queues/${q(name)}${cursor ? `?cursor=${q(cursor)}` : ""}`);
  const again = () => queueView(view, params, cursor);
  const pick = selectable(data.jobs, (job) => job.jid || "");
  const rows = data.jobs.map((job) => el("tr", {},
    READ_ONLY ? null : pick.cell(job), el("td", {}, job.class), el("td", { class: "args" }, short(job.args, 200)),
    el("td", {}, job.jid), timeCell(job.enqueued_at),
    el("td", { class: "actions" }, action(view, "Delete", () => post(`api/queues/${q(name)}/delete`, { jids: [job.jid] }),
      { danger: true, after: again }))));
  const head = [READ_ONLY ? null : pick.all, "Job", "Arguments", "JID", "Enqueued", ""].filter((h) => h !== null);
  fill(view,
    el("p", {}, `${count(data.size, "job")}, latency ${duration(data.latency)}`, data.paused ? el("span", { class: "badge warn" }, "paused") : null),
    el("div", { class: "toolbar" },
      action(view, "Delete selected", (jids) => post(`api/queues/${q(name)}/delete`, { jids }),
        { danger: true, pick, confirm: (jids) => `Delete ${count(jids.length, "selected job")}?`, after: again })),
    table(head, rows),
    pager(view, cursor, data.cursor, (next) => queueView(view, params, next)));
}

function pager(view, cursor, next, go) {
  return el("nav", { class: "pager", "aria-label": "Pages" },
    cursor ? button("First page", () => go(null)) : null,
    next ? button("Next page", () => go(next)) : null);
}

// -- Retries, Scheduled, Dead --------------------------------------------------

const ACTION_LABELS = { retry: "Retry", delete: "Delete", kill: "Kill", add_to_queue: "Add to queue" };
const DANGEROUS = new Set(["delete", "kill"]);

async function setView(view, kind, state) {
  const current = state || { cursor: null, q: "" };
  const query = new URLSearchParams();
  if (current.cursor) query.set("cursor", current.cursor);
  if (current.q) query.set("q", current.q);
  const data = await api(`api/sets/${kind}?${query}`);
  const again = () => setView(view, kind, current);
  const pick = selectable(data.entries, (entry) => entry.id);
  const rows = data.entries.map((entry) => el("tr", {},
    READ_ONLY ? null : pick.cell(entry), timeCell(entry.at),
    el("td", {}, el("a", { href: `${kind}/entry?id=${q(entry.id)}` }, entry.class)),
    el("td", {}, entry.queue), el("td", { class: "args" }, short(entry.args, 160)),
    el("td", { class: "error" }, entry.error_class ? `${entry.error_class}: ${short(entry.error_message || "", 160)}` : "")));
  const search = el("input", { type: "search", name: "q", value: current.q, placeholder: "Filter: class, argument, error…", "aria-label": "Filter" });
  const form = el("form", { class: "filter", role: "search", onsubmit: (event) => {
    event.preventDefault();
    setView(view, kind, { cursor: null, q: search.value.trim() });
  } }, search, el("button", { type: "submit" }, "Filter"));
  const bulk = data.actions.map((name) => action(view, `${ACTION_LABELS[name]} selected`,
    (ids) => post(`api/sets/${kind}/${name}`, { ids }),
    { danger: DANGEROUS.has(name), pick, after: again,
      confirm: DANGEROUS.has(name) ? (ids) => `${ACTION_LABELS[name]} ${count(ids.length, "selected job")}?` : null }));
  const whole = data.set_actions.map((name) => action(view, `${ACTION_LABELS[name]} all`,
    () => post(`api/sets/${kind}/${name}/all`),
    { danger: true, confirm: `${ACTION_LABELS[name]} ${data.size === 1 ? "the 1 job" : `all ${count(data.size, "job")}`}?`, after: () => setView(view, kind) }));
  fill(view,
    el("p", {}, count(data.size, "job"), data.truncated ? el("span", { class: "badge warn" }, "search stopped early: results are partial") : null),
    form, el("div", { class: "toolbar" }, bulk, whole),
    table([READ_ONLY ? null : pick.all, "When", "Job", "Queue", "Arguments", "Error"].filter((h) => h !== null), rows),
    pager(view, current.cursor, data.cursor, (next) => setView(view, kind, { cursor: next, q: current.q })));
}

async function entryView(view) {
  const kind = location.pathname.split("/").slice(-2)[0];
  const id = new URLSearchParams(location.search).get("id") || "";
  let data;
  try {
    data = await api(`api/sets/${kind}/entry?id=${q(id)}`);
  } catch (error) {
    fill(view, el("p", { class: "notice error", role: "alert" }, error.message), el("a", { href: kind }, "Back"));
    return;
  }
  const back = (result) => {
    if (result && result.message) carry(result.message);
    location.href = kind;
  };
  const fields = [
    ["Job", data.class], ["Queue", data.queue], ["JID", data.jid], ["When", when(data.at)],
    ["Enqueued", when(data.enqueued_at)], ["Created", when(data.created_at)], ["Failed", when(data.failed_at)],
    ["Retried", when(data.retried_at)], ["Retry count", data.retry_count], ["Error", data.error_class ? `${data.error_class}: ${data.error_message}` : ""],
  ].filter(([, value]) => value !== null && value !== undefined && value !== "");
  fill(view,
    el("dl", { class: "fields" }, fields.map(([label, value]) => [el("dt", {}, label), el("dd", {}, String(value))])),
    el("div", { class: "toolbar" }, data.actions.map((name) => action(view, ACTION_LABELS[name],
      () => post(`api/sets/${kind}/${name}`, { ids: [data.id] }),
      { danger: DANGEROUS.has(name), confirm: DANGEROUS.has(name) ? `${ACTION_LABELS[name]} this job?` : null, after: back }))),
    el("h2", {}, "Arguments"), el("pre", { class: "args" }, JSON.stringify(data.args, null, 2)),
    data.backtrace ? [el("h2", {}, "Backtrace"), el("pre", { class: "backtrace" }, data.backtrace.join("\n"))] : null,
    el("h2", {}, "Payload"), el("pre", {}, JSON.stringify(data.payload, null, 2)));
}

// -- Metrics and Search ----------------------------------------------------------

const WINDOWS = [["minutes=60", "1 hour"], ["minutes=480", "8 hours"], ["hours=24", "24 hours"], ["hours=72", "3 days"]];

function windowPicker(current, go) {
  return el("div", { class: "toolbar", role: "group", "aria-label": "Window" }, WINDOWS.map(([value, label]) =>
    el("button", { type: "button", "aria-pressed": String(value === current), onclick: () => go(value) }, label)));
}

async function metricsView(view, windowArg) {
  const chosen = windowArg || WINDOWS[0][0];
  const data = await api(`api/metrics?${chosen}`);
  const rows = data.classes.map((row) => el("tr", {},
    el("td", {}, el("a", { href: `metrics/${q(row.class)}` }, row.class)),
    el("td", { class: "num" }, number(row.processed)), el("td", { class: "num" }, number(row.failed)),
    el("td", { class: "num" }, `${row.avg_ms.toFixed(1)} ms`), el("td", { class: "num" }, `${row.seconds.toFixed(1)} s`)));
  fill(view, windowPicker(chosen, (value) => metricsView(view, value)),
    el("p", { class: "muted" }, `${when(data.starts_at)} – ${when(data.ends_at)}`),
    table(["Job", "Processed", "Failed", "Mean duration", "Total time"], rows));
}

async function jobMetricsView(view, params, windowArg) {
  const chosen = windowArg || WINDOWS[0][0];
  document.querySelector("h1").textContent = `Metrics: ${params.klass}`;
  const data = await api(`api/metrics/${q(params.klass)}?${chosen}`);
  const labels = data.series.map((row) => row.bucket);
  const top = Math.max(1, ...data.histogram.counts);
  const bars = data.histogram.labels.map((label, index) => el("tr", {},
    el("th", { scope: "row" }, label),
    el("td", {}, el("span", { class: "bar", style: null, "data-width": Math.round((100 * data.histogram.counts[index]) / top) })),
    el("td", { class: "num" }, number(data.histogram.counts[index]))));
  fill(view, windowPicker(chosen, (value) => jobMetricsView(view, params, value)),
    cards([["Processed", number(data.totals.processed)], ["Failed", number(data.totals.failed)],
      ["Mean duration", `${data.totals.avg_ms.toFixed(1)} ms`]]),
    chart("Processed and failed per bucket", labels, [
      { name: "Processed", values: data.series.map((row) => row.processed) },
      { name: "Failed", values: data.series.map((row) => row.failed) }]),
    chart("Mean duration per bucket (ms)", labels, [{ name: "Mean ms", values: data.series.map((row) => row.avg_ms) }]),
    el("h2", {}, "Duration histogram"),
    data.granularity === "minutely" ? table(["Up to", "", "Jobs"], bars) : el("p", { class: "muted" }, "Histograms are kept per minute: choose a window of hours or less."));
  // Widths are set through the CSSOM: the content security policy refuses inline style attributes.
  view.querySelectorAll(".bar").forEach((bar) => { bar.style.width = `${bar.dataset.width}%`; });
}

async function searchView(view) {
  const initial = new URLSearchParams(location.search).get("q") || "";
  const input = el("input", { type: "search", name: "q", value: initial, placeholder: "jid, class, argument, error…", "aria-label": "Search" });
  const results = el("div", {});
  async function run(text) {
    if (!text) { fill(results); return; }
    history.replaceState(null, "", `search?q=${q(text)}`);
    const data = await api(`api/search?q=${q(text)}`);
    const rows = data.results.map((row) => el("tr", {},
      el("td", {}, row.kind === "queues" ? el("a", { href: row.page }, row.name) : el("a", { href: row.page }, row.kind)),
      el("td", {}, row.id ? el("a", { href: `${row.page}/entry?id=${q(row.id)}` }, row.class) : row.class),
      el("td", {}, row.jid), el("td", { class: "args" }, short(row.args, 160)),
      el("td", { class: "error" }, row.error_class || "")));
    fill(results, data.truncated ? el("p", { class: "badge warn" }, "The search stopped early: results are partial.") : "",
      table(["Where", "Job", "JID", "Arguments", "Error"], rows, `${number(rows.length)} found`));
  }
  fill(view, el("form", { class: "filter", role: "search", onsubmit: (event) => {
    event.preventDefault();
    run(input.value.trim()).catch((error) => notice(view, error.message, "error"));
  } }, input, el("button", { type: "submit" }, "Search")), results);
  if (initial) await run(initial);
}

// -- Start -------------------------------------------------------------------------

const VIEWS = {
  dashboard: dashboardView, busy: busyView, queues: queuesView, queue: queueView,
  retries: (view) => setView(view, "retries"), scheduled: (view) => setView(view, "scheduled"),
  dead: (view) => setView(view, "dead"), entry: entryView, metrics: (view) => metricsView(view),
  "job-metrics": (view, params) => jobMetricsView(view, params), search: searchView,
};

// -- Pages from plugins ----------------------------------------------------------
// A plugin page's own script (add_page(..., scripts=[...]), loaded after this
// one) registers its view here and draws it with the same helpers, so its
// values are text too and its controls disappear in read-only mode.

window.WurkDashboard = Object.freeze({
  READ_ONLY, el, fill, api, post, q, when, timeCell, duration, number, count, short, notice, button, action,
  table, cards, pager, selectable,
  view(name, draw) {
    if (VIEWS[name]) throw new Error(`the dashboard view ${name} is defined twice`);
    VIEWS[name] = draw;
  },
});

document.addEventListener("DOMContentLoaded", () => {
  for (const view of document.querySelectorAll("[data-view]")) {
    const params = {};
    for (const [key, value] of Object.entries(view.dataset)) {
      if (key.startsWith("param")) params[key.slice(5).toLowerCase()] = value;
    }
    const draw = VIEWS[view.dataset.view];
    if (draw) {
      Promise.resolve(draw(view, params)).then(() => {
        const message = carried();
        if (message) notice(view, message);
        view.setAttribute("data-ready", "1");
      }, (error) => { notice(view, error.message, "error"); view.setAttribute("data-ready", "1"); });
    }
  }
});
