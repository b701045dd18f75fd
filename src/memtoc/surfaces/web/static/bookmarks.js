// The bookmarks card: the project's salient moments (decisions, resolutions, validated facts),
// most important first; choosing one opens the segment its first event is filed under.

import { api } from "./api.js";
import { fill, h, notice, stamp } from "./dom.js";

const SHOWN = 8;

export class Bookmarks {
  /** @param {HTMLElement} root  @param {(eventId: string) => Promise<void>} onOpen */
  constructor(root, onOpen) {
    this.root = root;
    this.onOpen = onOpen;
    this.ticket = 0;
  }

  async load(project) {
    const ticket = ++this.ticket;
    fill(this.root, notice("info", "Loading bookmarks…"));
    let data;
    try {
      data = await api.bookmarks(project, SHOWN);
    } catch (err) {
      if (ticket === this.ticket) fill(this.root, notice("error", "Bookmarks unavailable: " + err.message));
      return;
    }
    if (ticket !== this.ticket) return; // another project was chosen meanwhile
    const marks = data.bookmarks || [];
    if (!marks.length) {
      fill(this.root, notice("info", "No bookmarks yet: decisions and resolutions are kept as sessions are processed."));
      return;
    }
    fill(this.root, h("ol", { class: "bookmarks", dataset: { testid: "bookmarks" } }, marks.map((b) =>
      h("li", {}, h("button", {
        type: "button",
        class: "result bookmark",
        title: b.content,
        dataset: { testid: "bookmark", id: b.bookmark_id },
        onclick: () => this.open(b),
      },
        h("span", { class: "row-head" },
          h("span", { class: "kind kind-bookmark" }, b.type),
          h("span", { class: "period" }, stamp(b.created_at)),
          h("span", { class: "count" }, Number(b.importance).toFixed(2))),
        h("span", { class: "row-abstract" }, b.content))))));
  }

  async open(mark) {
    const first = (mark.event_ids || [])[0];
    if (!first) return;
    try {
      await this.onOpen(first);
    } catch (err) {
      this.root.prepend(notice("error", "Cannot open this bookmark: " + err.message));
    }
  }
}
