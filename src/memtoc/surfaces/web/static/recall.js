// The recall box: a question and a token budget → the assembled context, its token count, and
// the events each item cites.

import { ApiError, api } from "./api.js";
import { degradedNote, fill, h, notice, opensWith, plural, stamp } from "./dom.js";

export class Recall {
  /** @param {HTMLFormElement} form  @param {HTMLElement} out  @param {() => string|null} project */
  constructor(form, out, project) {
    this.out = out;
    this.project = project;
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const budget = Number.parseInt(form.elements.budget.value, 10) || 1000;
      this.run(form.elements.query.value.trim(), budget);
    });
  }

  async run(query, budget) {
    if (!query) return;
    fill(this.out, notice("info", "Assembling context…"));
    let result;
    try {
      result = await api.recall(query, budget, this.project());
    } catch (err) {
      const msg = err instanceof ApiError && err.status === 501
        ? "Recall is not available on this server (HTTP 501): " + err.message
        : "Recall failed: " + err.message;
      fill(this.out, notice(err.status === 501 ? "warn" : "error", msg));
      return;
    }
    const items = result.items || [];
    const tokens = result.tokens ?? items.reduce((n, i) => n + (i.tokens || 0), 0);
    const over = result.budget && tokens > result.budget;
    fill(this.out,
      h("p", { class: "recall-total", dataset: { testid: "recall-tokens" } },
        h("strong", { class: over ? "warn-text" : "" }, plural(tokens, "token")),
        " of " + (result.budget ?? budget) + " · " + plural(items.length, "item") +
          (result.elapsed_ms !== undefined ? " · " + Math.round(result.elapsed_ms) + " ms" : ""),
        degradedNote(result.degraded)),
      h("ol", { class: "recall-items", dataset: { testid: "recall-items" } }, items.map((item) => {
        const cited = (item.events || []).length + (item.cites || []).length;
        const repeated = opensWith(item.title, item.text);
        // an event says who spoke (the text does not: a user's request read like the agent's)
        const who = item.kind === "event" ? item.role || item.events?.[0]?.role : null;
        return h("li", { class: "recall-item" },
          h("p", { class: "row-head" },
            h("span", { class: "kind kind-" + item.kind }, item.kind),
            who ? h("span", { class: "role", dataset: { testid: "recall-role" } }, who) : null,
            h("span", { class: "period" }, item.tier + " · " + stamp(item.start_time)),
            h("span", { class: "count" }, plural(item.tokens, "token"))),
          item.title && !repeated ? h("p", { class: "row-title" }, item.title) : null,
          h("div", { class: "recall-text" }, item.text),
          cited ? h("details", { class: "cites" },
            h("summary", {}, plural(cited, "citation")),
            h("ul", {}, (item.events || []).map((e) =>
              h("li", {}, h("code", {}, e.event_id), " " + e.role + " · " + stamp(e.timestamp))),
              (item.cites || []).map((id) => h("li", {}, h("code", {}, id), " (cited)")))) : null);
      })));
  }
}
