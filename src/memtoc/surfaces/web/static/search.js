// The search box: teleport results (nodes, grips, bookmarks, events) in a list under the header;
// choosing one opens the TOC node it belongs to.

import { api } from "./api.js";
import { afterTitle, degradedNote, fill, h, notice, stamp } from "./dom.js";

const KIND_LABEL = { node: "Node", grip: "Grip", bookmark: "Bookmark", event: "Event" };

export class Search {
  /**
   * @param {HTMLFormElement} form  @param {HTMLElement} panel
   * @param {() => string|null} project  @param {(item: object) => Promise<void>} onPick
   */
  constructor(form, panel, project, onPick) {
    this.form = form;
    this.panel = panel;
    this.project = project;
    this.onPick = onPick;
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      this.run(form.elements.q.value.trim());
    });
    panel.addEventListener("keydown", (ev) => {
      if (ev.key === "Escape") this.close(true);
    });
    // A click elsewhere on the page closes the results (they float over the panes).
    document.addEventListener("click", (ev) => {
      if (!panel.hidden && !panel.contains(ev.target) && !form.contains(ev.target)) this.close(false);
    });
    form.elements.q.addEventListener("keydown", (ev) => {
      if (ev.key === "Escape") this.close(false);
      if (ev.key === "ArrowDown" && !panel.hidden) {
        panel.querySelector("button.result")?.focus();
        ev.preventDefault();
      }
    });
  }

  close(refocus) {
    this.panel.hidden = true;
    if (refocus) this.form.elements.q.focus();
  }

  async run(query) {
    if (!query) return;
    this.panel.hidden = false;
    fill(this.panel, notice("info", "Searching…"));
    let result;
    try {
      const scope = this.form.elements.all.checked ? null : this.project();
      result = await api.search(query, scope, 12);
    } catch (err) {
      fill(this.panel, notice("error", "Search failed: " + err.message));
      return;
    }
    const items = result.items || [];
    const head = h("div", { class: "results-head" },
      h("strong", {}, items.length + " result" + (items.length === 1 ? "" : "s")),
      " for “" + query + "”",
      degradedNote(result.degraded),
      result.time_range?.applied ? h("span", {}, " · time: " + result.time_range.expression) : null,
      outsideWindow(result.time_range, items)
        ? h("span", { class: "outside-window", dataset: { testid: "outside-window" } },
          "Nothing recorded then: these are the best matches from other times.")
        : null,
      h("button", { type: "button", class: "link close", onclick: () => this.close(true) }, "close"));
    const list = h("ol", { class: "results", dataset: { testid: "search-results" } },
      items.map((item) => h("li", {}, h("button", {
        type: "button",
        class: "result",
        dataset: { testid: "search-result", kind: item.kind, id: item.id, project: item.project },
        onclick: () => this.pick(item),
        onkeydown: (ev) => this.arrow(ev),
      },
        h("span", { class: "row-head" },
          h("span", { class: "kind kind-" + item.kind }, KIND_LABEL[item.kind] || item.kind),
          this.form.elements.all.checked ? h("span", { class: "project" }, item.project) : null,
          h("span", { class: "period" }, stamp(item.start_time)),
          h("span", { class: "count" }, "score " + Number(item.score).toFixed(2))),
        h("span", { class: "row-title" }, shortIds(item.title || item.id)),
        this.body(item)))));
    fill(this.panel, head, items.length ? list : notice("info", "Nothing found."));
  }

  /** The text under the title, without the title it opens with (a node's L0, a grip). */
  body(item) {
    const rest = afterTitle(item.title, item.text);
    return rest ? h("span", { class: "row-abstract" }, rest) : null;
  }

  arrow(ev) {
    const buttons = [...this.panel.querySelectorAll("button.result")];
    const at = buttons.indexOf(ev.target.closest("button.result"));
    if (ev.key === "ArrowDown" && at < buttons.length - 1) buttons[at + 1].focus();
    else if (ev.key === "ArrowUp") (at > 0 ? buttons[at - 1] : this.form.elements.q).focus();
    else return;
    ev.preventDefault();
  }

  async pick(item) {
    this.close(false); // the results get out of the way at once; they come back on an error
    try {
      await this.onPick(item);
    } catch (err) {
      this.panel.hidden = false;
      this.panel.prepend(notice("error", "Cannot open this result: " + err.message));
    }
  }
}

/** Shorten UUID-like session ids in labels ("assistant in 7f7fbc26…"). */
function shortIds(text) {
  return text.replace(/\b([0-9a-f]{8})-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/g, "$1…");
}

/** The TOC node a search item belongs to (a node itself, a grip's node, an event's segment). */
export async function nodeOfItem(item, project) {
  if (item.kind === "node") return item.id;
  if (item.kind === "grip") return (await api.grip(item.id, 0, 0)).grip.toc_node_id;
  const first = (item.events || [])[0];
  if (!first) throw new Error("it cites no event");
  const at = new Date(first.timestamp).getTime();
  const data = await api.timeline(item.project || project, "segment",
    new Date(at).toISOString(), new Date(at + 1).toISOString());
  const nodes = Array.isArray(data) ? data : data.nodes || [];
  const same = nodes.find((n) => n.session_id === first.session_id) || nodes[0];
  if (!same) throw new Error("no segment covers " + first.timestamp + " yet");
  return same.node_id;
}

/** Whether a time-resolved result has items, none in its window (labels.outside_window's twin). */
function outsideWindow(range, items) {
  if (!range || range.start_ms == null || range.end_ms == null || !items.length) return false;
  return !items.some((i) => {
    const start = Date.parse(i.start_time);
    return start < range.end_ms && Math.max(Date.parse(i.end_time), start + 1) > range.start_ms;
  });
}
