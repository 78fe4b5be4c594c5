// The dashboard's Limiters page, drawn from /api/limiters with the dashboard's
// own helpers (window.WurkDashboard): every value is written as text, and the
// Reset buttons are not drawn in read-only mode.
"use strict";

(() => {
  const D = window.WurkDashboard;
  const { el, fill, api, post, q, number, short } = D;
  const COUNTER_LABELS = {
    held: "held", held_time: "held s", immediate: "immediate", waited: "waited",
    wait_time: "waited s", overages: "overages", reclaimed: "reclaimed",
  };

  const amount = (value) => (Number.isInteger(value) ? number(value) : Number(value || 0).toFixed(1));

  function usage(row) {
    if (row.error) return el("span", { class: "muted" }, row.error);
    const limit = Math.max(row.limit || 0, 0);
    return [
      el("progress", { value: Math.min(row.used, limit), max: Math.max(limit, 1), class: row.available ? null : "full",
        "aria-label": `${amount(row.used)} of ${amount(limit)} used` }),
      ` ${amount(row.used)} / ${amount(limit)}`,
      row.available ? el("span", { class: "badge" }, "available") : el("span", { class: "badge warn" }, "exhausted"),
    ];
  }

  function counters(row) {
    if (!row.counters) return "";
    return Object.entries(row.counters).map(([name, value]) => `${COUNTER_LABELS[name] || name} ${amount(value)}`).join(" · ");
  }

  async function limitersView(view, current) {
    const chosen = current || { cursor: null, substr: "" };
    const query = new URLSearchParams();
    if (chosen.cursor) query.set("cursor", chosen.cursor);
    if (chosen.substr) query.set("substr", chosen.substr);
    const data = await api(`api/limiters?${query}`);
    const again = () => limitersView(view, chosen);
    const rows = data.limiters.map((row) => el("tr", {},
      el("td", {}, el("strong", {}, row.name)),
      el("td", {}, row.type || ""),
      el("td", {}, usage(row)),
      D.timeCell(row.reset_at),
      el("td", { class: "args" }, row.options ? short(row.options, 160) : ""),
      el("td", { class: "args" }, counters(row)),
      el("td", { class: "actions" }, row.error ? null : D.action(view, "Reset",
        () => post(`api/limiters/${q(row.name)}/reset`),
        { danger: true, confirm: `Reset ${row.name}? Its state and counters are cleared.`, after: again }))));
    const search = el("input", { type: "search", name: "substr", value: chosen.substr, placeholder: "Name contains…", "aria-label": "Filter by name" });
    const form = el("form", { class: "filter", role: "search", onsubmit: (event) => {
      event.preventDefault();
      limitersView(view, { cursor: null, substr: search.value.trim() });
    } }, search, el("button", { type: "submit" }, "Filter"));
    fill(view,
      // Counted here, not with D.count, which dashboards older than this script lack.
      el("p", {}, `${number(data.size)} ${data.size === 1 ? "limiter" : "limiters"} registered`),
      form,
      D.table(["Limiter", "Type", "Usage", "Frees up", "Options", "Counters", ""], rows),
      D.pager(view, chosen.cursor, data.cursor, (next) => limitersView(view, { cursor: next, substr: chosen.substr })));
  }

  D.view("limiters", (view) => limitersView(view));
})();
