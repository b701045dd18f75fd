// The timeline tree: years → months → weeks → days → segments, loaded lazily.
//
// Roots come from /v1/toc. Expanding a node asks /v1/nodes/{id} for its children (ids in order)
// and /v1/timeline for the full child nodes of that period (keywords, event counts); a child the
// timeline did not return is shown from the node view's short form. Rows are buttons, so the tree
// works with Tab/Enter; ↑/↓ move between rows, → expands, ← collapses or goes to the parent.

import { api } from "./api.js";
import { CHILD_LEVEL, chips, fill, h, levelName, notice, periodLabel, plural } from "./dom.js";

export class Tree {
  /** @param {HTMLElement} root  @param {(id: string) => void} onOpen */
  constructor(root, onOpen) {
    this.root = root;
    this.onOpen = onOpen;
    this.project = null;
    this.items = new Map(); // node id → {li, node, toggle, list, loaded}
    this.selected = null;
    root.addEventListener("keydown", (ev) => this.keydown(ev));
  }

  /** Show the roots (years) of `project`. */
  async load(project) {
    this.project = project;
    this.items.clear();
    this.selected = null;
    fill(this.root, notice("info", "Loading the table of contents…"));
    const data = await api.toc(project);
    const nodes = data.nodes || [];
    const list = h("ul", { class: "tree", role: "tree", "aria-label": "Table of contents" });
    for (const node of nodes) list.append(this.item(node));
    fill(this.root, nodes.length ? list : notice("info", "No table of contents yet: " + (data.hint || "run `memtoc process`") + "."));
  }

  item(node) {
    const leaf = node.level === "segment";
    const toggle = leaf
      ? h("span", { class: "twisty leaf", "aria-hidden": "true" })
      : h("button", {
          class: "twisty",
          type: "button",
          "aria-label": "Expand " + node.title,
          "aria-expanded": "false",
          dataset: { testid: "tree-toggle" },
          onclick: () => this.toggle(node.node_id),
        }, "▸");
    const counts = node.event_count ? plural(node.event_count, "event") : null;
    const open = h("button", {
      class: "row-main",
      type: "button",
      dataset: { testid: "tree-node", nodeId: node.node_id, level: node.level },
      onclick: () => this.select(node.node_id, true),
    },
      h("span", { class: "row-head" },
        h("span", { class: "level level-" + node.level }, levelName(node.level)),
        h("span", { class: "period" }, periodLabel(node, true)),
        counts && h("span", { class: "count" }, counts)),
      h("span", { class: "row-title" }, node.title || "(untitled)"),
      node.abstract && h("span", { class: "row-abstract" }, node.abstract),
      chips(node.keywords, 3));
    const li = h("li", { role: "treeitem", "aria-expanded": leaf ? null : "false", "aria-selected": "false" },
      h("div", { class: "row" }, toggle, open));
    this.items.set(node.node_id, { li, node, toggle, list: null, loaded: false });
    return li;
  }

  /** Expand or collapse a node. */
  async toggle(id, force) {
    const entry = this.items.get(id);
    if (!entry || entry.node.level === "segment") return;
    const expand = force ?? entry.li.getAttribute("aria-expanded") !== "true";
    entry.li.setAttribute("aria-expanded", String(expand));
    entry.toggle.setAttribute("aria-expanded", String(expand));
    entry.toggle.textContent = expand ? "▾" : "▸";
    if (!expand) {
      if (entry.list) entry.list.hidden = true;
      return;
    }
    if (!entry.loaded) {
      entry.loaded = true;
      entry.list = h("ul", { role: "group" }, h("li", { class: "loading" }, "Loading…"));
      entry.li.append(entry.list);
      try {
        const children = await this.children(entry.node);
        fill(entry.list, children.length ? children.map((c) => this.item(c)) : h("li", { class: "empty" }, "No children."));
      } catch (err) {
        entry.loaded = false;
        fill(entry.list, h("li", {}, notice("error", err.message)));
      }
    }
    entry.list.hidden = false;
  }

  /** The full child nodes of `node`, in the parent's order. */
  async children(node) {
    let view = await api.node(node.node_id, this.project, "L0");
    const short = [...(view.children || [])];
    while (view.more > 0 && short.length) { // the rest of a busy day, a page at a time
      view = await api.node(node.node_id, this.project, "L0", short.length);
      if (!(view.children || []).length) break;
      short.push(...view.children);
    }
    if (!short.length) return [];
    const byId = new Map();
    try {
      // One past the end: a child starting at the parent's last instant still overlaps.
      const until = new Date(Date.parse(node.end_time) + 1).toISOString();
      const data = await api.timeline(this.project, CHILD_LEVEL[node.level], node.start_time, until);
      for (const full of Array.isArray(data) ? data : data.nodes || []) byId.set(full.node_id, full);
    } catch {
      // The short form below still lists every child; only keywords and counts are missing.
    }
    return short.map((c) => byId.get(c.node_id) || c);
  }

  /** Mark `id` selected (and tell the app when asked to open it). */
  select(id, open) {
    if (this.selected) this.items.get(this.selected)?.li.setAttribute("aria-selected", "false");
    this.selected = id;
    const entry = this.items.get(id);
    if (entry) {
      entry.li.setAttribute("aria-selected", "true");
      entry.li.querySelector(".row-main").scrollIntoView({ block: "nearest" });
    }
    if (open) this.onOpen(id);
  }

  /** Expand the chain of ancestors `path` (root first) and select its last node. */
  async reveal(path) {
    for (const id of path.slice(0, -1)) {
      if (!this.items.has(id)) return false;
      await this.toggle(id, true);
    }
    const target = path[path.length - 1];
    if (!this.items.has(target)) return false;
    this.select(target, false);
    return true;
  }

  keydown(ev) {
    const current = ev.target.closest?.(".row-main, .twisty");
    if (!current) return;
    const rows = [...this.root.querySelectorAll(".row-main")].filter((el) => el.offsetParent !== null);
    const row = current.closest(".row").querySelector(".row-main");
    const at = rows.indexOf(row);
    const id = row.dataset.nodeId;
    if (ev.key === "ArrowDown" && at < rows.length - 1) rows[at + 1].focus();
    else if (ev.key === "ArrowUp" && at > 0) rows[at - 1].focus();
    else if (ev.key === "ArrowRight") this.toggle(id, true);
    else if (ev.key === "ArrowLeft") {
      const li = row.closest("li");
      if (li.getAttribute("aria-expanded") === "true") this.toggle(id, false);
      else li.parentElement.closest("li")?.querySelector(".row-main")?.focus();
    } else return;
    ev.preventDefault();
  }
}
