// The detail pane: one node at L1 (title, period, abstract, bullets, keywords, overview,
// children), where clicking a bullet expands its grips inline into the events behind it.

import { api } from "./api.js";
import { chips, clock, fill, h, levelName, notice, periodLabel, plural, stamp } from "./dom.js";

const LONG_TEXT = 1200; // characters shown before "show all"

export class Detail {
  /** @param {HTMLElement} root  @param {(id: string) => void} onOpen  open another node */
  constructor(root, onOpen) {
    this.root = root;
    this.onOpen = onOpen;
  }

  empty() {
    fill(this.root, h("div", { class: "placeholder" },
      h("h2", {}, "Pick a period"),
      h("p", {}, "Open a year, month, week or day on the left, or search above. " +
        "Each summary bullet opens the events it was drawn from.")));
  }

  /**
   * Load and show a node (unless `current()` says a newer request superseded this one);
   * returns the node dict, or null when superseded.
   */
  async show(id, project, ancestors, current = () => true) {
    const view = await api.node(id, project, "L1");
    if (!current()) return null;
    const node = view.node;
    const crumbs = (ancestors || []).slice(0, -1);
    const meta = [
      h("span", { class: "level level-" + node.level }, levelName(node.level)),
      h("span", {}, periodLabel(node)),
      node.event_count ? h("span", {}, plural(node.event_count, "event")) : null,
      node.token_count ? h("span", {}, plural(node.token_count, "token")) : null,
      h("span", { title: "summariser" }, "by " + node.summarizer + (node.version ? " · v" + node.version : "")),
    ];
    fill(this.root, h("article", { class: "node", dataset: { testid: "node-detail", nodeId: node.node_id } },
      crumbs.length ? h("nav", { class: "crumbs", "aria-label": "Breadcrumbs", dataset: { testid: "crumbs" } },
        crumbs.map((c, i) => [i ? h("span", { class: "sep", "aria-hidden": "true" }, "›") : null,
          h("button", { type: "button", class: "link", title: c.title, onclick: () => this.onOpen(c.node_id) },
            periodLabel(c, true))])) : null,
      h("h2", { tabindex: "-1" }, node.title || node.node_id),
      h("p", { class: "meta" }, meta),
      node.degraded ? notice("warn", "Built in a degraded mode: " + node.degraded) : null,
      view.provisional ? h("p", { class: "provisional", dataset: { testid: "provisional" } },
        "Provisional summary: this period is still running or has newer parts, listed below; " +
        "it is summarised again as they settle.") : null,
      node.abstract ? h("p", { class: "abstract" }, node.abstract) : null,
      chips(node.keywords, 16),
      this.bullets(node),
      node.overview ? h("details", { class: "overview" },
        h("summary", {}, "Overview (L1)"), h("div", { class: "prose" }, node.overview)) : null,
      this.children(view.children || []),
      h("p", { class: "ids" }, h("code", {}, node.node_id))));
    this.root.scrollTop = 0;
    return node;
  }

  bullets(node) {
    if (!node.bullets?.length) return null;
    return h("section", { "aria-labelledby": "bullets-h" },
      h("h3", { id: "bullets-h" }, "Summary"),
      h("ul", { class: "bullets" }, node.bullets.map((b) => this.bullet(b))));
  }

  bullet(bullet) {
    const grips = bullet.grip_ids || [];
    const li = h("li", { class: "bullet", dataset: { testid: "bullet" } });
    if (!grips.length) {
      li.append(h("span", { class: "bullet-text" }, bullet.text));
      return li;
    }
    const events = h("div", { class: "grip-events", hidden: true, dataset: { testid: "grip-events" } });
    const button = h("button", {
      type: "button",
      class: "bullet-text",
      "aria-expanded": "false",
      title: "Show the events behind this bullet",
      dataset: { testid: "bullet-toggle" },
      onclick: async () => {
        const open = button.getAttribute("aria-expanded") !== "true";
        button.setAttribute("aria-expanded", String(open));
        events.hidden = !open;
        if (open && !events.dataset.loaded) {
          events.dataset.loaded = "1";
          await this.loadGrips(events, grips);
        }
      },
    }, bullet.text, h("span", { class: "grip-count" }, plural(grips.length, "grip")));
    li.append(button, events);
    return li;
  }

  async loadGrips(container, gripIds) {
    fill(container, notice("info", "Expanding…"));
    const parts = [];
    for (const id of gripIds) {
      try {
        parts.push(this.grip(await api.grip(id)));
      } catch (err) {
        parts.push(notice("error", id + ": " + err.message));
      }
    }
    fill(container, parts);
  }

  grip(view) {
    const grip = view.grip;
    const jump = grip.toc_node_id && grip.toc_node_id !== this.root.querySelector("[data-node-id]")?.dataset.nodeId
      ? h("button", { type: "button", class: "link", onclick: () => this.onOpen(grip.toc_node_id) }, "open its segment")
      : null;
    return h("section", { class: "grip", dataset: { testid: "grip", gripId: grip.grip_id } },
      h("p", { class: "grip-head" },
        h("code", {}, grip.grip_id), " · ", stamp(grip.timestamp), " · ",
        plural(view.tokens, "token"), jump ? [" · ", jump] : null),
      h("ol", { class: "events" }, (view.events || []).map((e) => eventItem(e))));
  }

  children(children) {
    if (!children.length) return null;
    return h("section", { "aria-labelledby": "children-h" },
      h("h3", { id: "children-h" }, "Inside (" + children.length + ")"),
      h("ul", { class: "children" }, children.map((c) => h("li", {},
        h("button", { type: "button", class: "child", dataset: { testid: "child" }, onclick: () => this.onOpen(c.node_id) },
          h("span", { class: "row-head" },
            h("span", { class: "level level-" + c.level }, levelName(c.level)),
            h("span", { class: "period" }, periodLabel(c))),
          h("span", { class: "row-title" }, c.title || c.node_id),
          c.abstract ? h("span", { class: "row-abstract" }, c.abstract) : null)))));
  }
}

/** One event: role, time, type and text (tool calls and results in monospace). */
export function eventItem(event) {
  const tool = event.role === "tool" || /^tool_/.test(event.event_type || "");
  const text = event.text || "";
  const body = h(tool ? "pre" : "div", { class: tool ? "event-text mono" : "event-text" });
  if (text.length > LONG_TEXT) {
    body.textContent = text.slice(0, LONG_TEXT) + " …";
    const more = h("button", { type: "button", class: "link more", onclick: () => {
      body.textContent = text;
      more.remove();
    } }, "show all " + text.length.toLocaleString() + " characters");
    return wrap(event, body, more);
  }
  body.textContent = text;
  return wrap(event, body, null);
}

function wrap(event, body, more) {
  const inGrip = event.in_grip !== false;
  return h("li", {
    class: "event role-" + event.role + (inGrip ? " in-grip" : " context"),
    dataset: { testid: "event", eventId: event.event_id },
  },
    h("p", { class: "event-head" },
      h("span", { class: "role" }, event.role),
      h("time", { datetime: event.timestamp, title: stamp(event.timestamp) }, clock(event.timestamp)),
      h("span", { class: "etype" }, (event.event_type || "").replace(/_/g, " ")),
      inGrip ? null : h("span", { class: "ctx-label" }, "context")),
    body, more);
}
