// The dashboard's Cron pages, drawn from /api/cron with the dashboard's own
// helpers (window.WurkDashboard): every value is written as text, and the
// Pause, Unpause and Enqueue buttons are not drawn in read-only mode.
"use strict";

(() => {
  const D = window.WurkDashboard;
  const { el, fill, api, post, q, short } = D;

  function controls(view, loop, after) {
    const base = `api/cron/${q(loop.lid)}`;
    return [
      loop.paused
        ? D.action(view, "Unpause", () => post(`${base}/unpause`), { after })
        : D.action(view, "Pause", () => post(`${base}/pause`), { after }),
      D.action(view, "Enqueue now", () => post(`${base}/enqueue`), {
        after: async (result) => {
          if (after) await after(result);
          D.notice(view, result.jid ? `Enqueued ${loop.class} as ${result.jid}.` : "A client middleware stopped the push.");
        },
      }),
    ];
  }

  const status = (loop) => (loop.paused ? el("span", { class: "badge warn" }, "paused") : el("span", { class: "badge" }, "active"));
  const zone = (loop) => loop.tz || "UTC";

  async function listView(view, cursor) {
    const data = await api(`api/cron${cursor ? `?cursor=${q(cursor)}` : ""}`);
    const again = () => listView(view, cursor);
    const rows = data.loops.map((loop) => el("tr", {},
      el("td", {}, el("a", { href: `cron/${q(loop.lid)}` }, loop.label || loop.class), loop.label ? el("div", { class: "muted" }, loop.class) : null),
      el("td", { class: "args" }, loop.schedule), el("td", {}, zone(loop)), el("td", {}, loop.queue),
      el("td", { class: "args" }, short(loop.args, 120)),
      D.timeCell(loop.last_fired_at), D.timeCell(loop.next_fire_at), el("td", {}, status(loop)),
      el("td", { class: "actions" }, controls(view, loop, again))));
    fill(view,
      // Counted here, not with D.count, which dashboards older than this script lack.
      el("p", {}, `${data.size} periodic ${data.size === 1 ? "job" : "jobs"}`),
      D.table(["Job", "Schedule", "Zone", "Queue", "Arguments", "Last run", "Next run", "Status", ""], rows),
      D.pager(view, cursor, data.cursor, (next) => listView(view, next)));
  }

  async function loopView(view, params) {
    let data;
    try {
      data = await api(`api/cron/${q(params.lid)}`);
    } catch (error) {
      fill(view, el("p", { class: "notice error", role: "alert" }, error.message), el("a", { href: "cron" }, "All periodic jobs"));
      return;
    }
    document.querySelector("h1").textContent = `Periodic job ${data.label || data.class}`;
    const fields = [
      ["Job", data.class], ["Schedule", data.schedule], ["Zone", zone(data)], ["Queue", data.queue],
      ["Retry", JSON.stringify(data.retry)], ["Arguments", JSON.stringify(data.args)], ["Options", JSON.stringify(data.options)],
      ["Last run", D.when(data.last_fired_at)], ["Next run", data.paused ? "paused" : D.when(data.next_fire_at)], ["Loop id", data.lid],
    ].filter(([, value]) => value !== null && value !== undefined && value !== "");
    const rows = data.history.map((fire) => el("tr", {},
      D.timeCell(fire.fired_at), el("td", {}, el("a", { href: `search?q=${q(fire.jid)}` }, fire.jid))));
    fill(view,
      el("p", {}, status(data)),
      el("dl", { class: "fields" }, fields.map(([label, value]) => [el("dt", {}, label), el("dd", {}, String(value))])),
      el("div", { class: "toolbar" }, controls(view, data, () => loopView(view, params))),
      D.table(["Fired", "JID"], rows, "Last fires"));
  }

  D.view("cron", (view) => listView(view));
  D.view("cron-loop", loopView);
})();
