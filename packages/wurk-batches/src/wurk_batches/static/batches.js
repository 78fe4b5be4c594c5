// The dashboard's Batches pages, drawn from /api/batches with the dashboard's
// own helpers (window.WurkDashboard): every value is written as text.
"use strict";

(() => {
  const D = window.WurkDashboard;
  const { el, fill, api, q, number, short } = D;

  function state(batch) {
    if (!batch.exists) return el("span", { class: "badge" }, "expired");
    const badges = [];
    if (batch.invalidated) badges.push(el("span", { class: "badge warn" }, "invalidated"));
    if (batch.death_at) badges.push(el("span", { class: "badge warn" }, "dead"));
    if (batch.success_at) badges.push(el("span", { class: "badge" }, "succeeded"));
    else if (batch.complete) badges.push(el("span", { class: "badge" }, "complete"));
    else badges.push(el("span", { class: "badge" }, "running"));
    return badges;
  }

  function progress(batch) {
    const total = Math.max(0, batch.total || 0);
    return [
      el("progress", { value: Math.min(batch.done, total), max: Math.max(total, 1), "aria-label": `${batch.done} of ${total} done` }),
      ` ${number(batch.done)} / ${number(total)}`,
    ];
  }

  const link = (bid) => el("a", { href: `batches/${q(bid)}` }, bid);

  function rows(batches, dead) {
    return batches.map((batch) => el("tr", {},
      el("td", {}, link(batch.bid)),
      el("td", {}, batch.description || ""),
      el("td", {}, progress(batch)),
      el("td", { class: "num" }, number(batch.pending)),
      el("td", { class: "num" }, number(batch.failures)),
      D.timeCell(dead ? batch.listed_at : batch.created_at),
      el("td", {}, state(batch))));
  }

  async function listView(view, current) {
    const chosen = current || { dead: false, cursor: null };
    const query = new URLSearchParams();
    if (chosen.dead) query.set("dead", "1");
    if (chosen.cursor) query.set("cursor", chosen.cursor);
    const data = await api(`api/batches?${query}`);
    const tabs = el("div", { class: "toolbar", role: "group", "aria-label": "Which batches" },
      el("button", { type: "button", "aria-pressed": String(!data.dead), onclick: () => listView(view, { dead: false }) },
        `All (${number(data.size)})`),
      el("button", { type: "button", "aria-pressed": String(data.dead), onclick: () => listView(view, { dead: true }) },
        `Dead (${number(data.dead_size)})`));
    const heads = ["Batch", "Description", "Progress", "Pending", "Failures", data.dead ? "Died" : "Created", "State"];
    fill(view, tabs, D.table(heads, rows(data.batches, data.dead)),
      D.pager(view, chosen.cursor, data.cursor, (next) => listView(view, { dead: chosen.dead, cursor: next })));
  }

  function jids(title, found) {
    if (!found.size) return null;
    const items = found.sample.map((jid) => el("li", {}, el("a", { href: `search?q=${q(jid)}` }, jid)));
    const more = found.more ? el("li", { class: "muted" }, `and ${number(found.size - found.sample.length)} more`) : null;
    return [el("h2", {}, `${title} (${number(found.size)})`), el("ul", { class: "jids" }, items, more)];
  }

  function callbackRows(data) {
    const fired = { complete: data.complete_at, success: data.success_at, death: data.death_at };
    return Object.entries(data.callbacks).flatMap(([event, entries]) => entries.map((entry) => el("tr", {},
      el("td", {}, event), el("td", {}, entry.target), el("td", { class: "args" }, short(entry.options, 200)),
      D.timeCell(fired[event]))));
  }

  async function detailView(view, params) {
    document.querySelector("h1").textContent = `Batch ${params.bid}`;
    let data;
    try {
      data = await api(`api/batches/${q(params.bid)}`);
    } catch (error) {
      fill(view, el("p", { class: "notice error", role: "alert" }, error.message), el("a", { href: "batches" }, "All batches"));
      return;
    }
    const fields = [
      ["Description", data.description], ["Created", D.when(data.created_at)], ["Complete", D.when(data.complete_at)],
      ["Succeeded", D.when(data.success_at)], ["Died", D.when(data.death_at)], ["Callback queue", data.callback_queue],
      ["Tags", (data.tags || []).join(", ")],
    ].filter(([, value]) => value !== null && value !== undefined && value !== "");
    const failing = data.failed_jobs.map((job) => el("tr", {},
      el("td", {}, el("a", { href: `${job.kind}/entry?id=${q(job.id)}` }, job.kind)),
      el("td", {}, job.class), el("td", {}, job.jid),
      el("td", { class: "error" }, job.error_class ? `${job.error_class}: ${short(job.error_message || "", 200)}` : ""),
      el("td", { class: "num" }, job.retry_count === null ? "" : number(job.retry_count))));
    const children = data.children.batches.map((child) => el("tr", {},
      el("td", {}, link(child.bid)), el("td", {}, child.description || ""), el("td", {}, progress(child)),
      el("td", {}, state(child))));
    fill(view,
      D.cards([["Total", number(data.total)], ["Pending", number(data.pending)], ["Failures", number(data.failures)],
        ["Done", number(data.done)], ["Children", number(data.children.size)]]),
      el("p", {}, progress(data), " ", state(data)),
      el("dl", { class: "fields" },
        fields.map(([label, value]) => [el("dt", {}, label), el("dd", {}, String(value))]),
        data.parent_bid ? [el("dt", {}, "Parent"), el("dd", {}, link(data.parent_bid))] : null),
      D.table(["Event", "Callback", "Options", "Fired"], callbackRows(data), "Callbacks"),
      D.table(["Where", "Job", "JID", "Error", "Retries"], failing, "Failing jobs"),
      data.failed_jobs_truncated ? el("p", { class: "badge warn" }, "The search for failing jobs stopped early: the list is partial.") : null,
      data.children.size ? D.table(["Batch", "Description", "Progress", "State"], children,
        `Children (${number(data.children.size)}, ${number(data.pending_children)} not finished)`) : null,
      jids("Failing jids", data.failed_jids), jids("Dead jids", data.dead_jids), jids("Live jids", data.jids));
  }

  D.view("batches", (view) => listView(view));
  D.view("batch", detailView);
})();
