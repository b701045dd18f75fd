// Small DOM and formatting helpers. Text always goes in through textContent, never innerHTML:
// everything the page shows comes from recorded conversations and must not be interpreted.

/**
 * Create an element: h("div", {class: "x", dataset: {testid: "y"}, onclick: fn}, child, "text").
 * Attributes starting with "on" become listeners; null/false attributes and children are skipped.
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "dataset") Object.assign(el.dataset, value);
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace an element's content. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

const LEVEL_NAMES = { year: "Year", month: "Month", week: "Week", day: "Day", segment: "Segment" };
export const CHILD_LEVEL = { year: "month", month: "week", week: "day", day: "segment" };

export function levelName(level) {
  return LEVEL_NAMES[level] || level;
}

/** The period a node id names: "toc:week:2024-W03" → "2024-W03". */
export function periodOf(nodeId) {
  const parts = nodeId.split(":");
  return parts.slice(2).join(":");
}

// A period is a date of the store's calendar (its id says which): formatted as a date in UTC from
// its id, never from its start instant in the browser's zone — a browser west of the store's zone
// labelled toc:month:2024-01 "December 2023" and every day as the day before.
const UTC = { timeZone: "UTC" };
const dateFmt = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", ...UTC });
const monthFmt = new Intl.DateTimeFormat(undefined, { month: "long", year: "numeric", ...UTC });
const dayFmt = new Intl.DateTimeFormat(undefined, { weekday: "short", day: "numeric", month: "short", year: "numeric", ...UTC });
const shortDayFmt = new Intl.DateTimeFormat(undefined, { weekday: "short", day: "numeric", month: "short", ...UTC });
const spanFmt = new Intl.DateTimeFormat(undefined, { day: "numeric", month: "short", ...UTC });
const timeFmt = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });
const stampFmt = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });
const DAY_MS = 86400000;

/** The calendar date a period id names, at 00:00 UTC: "2024-03" → 1 March, "2024-W10" → its Monday. */
function idDate(nodeId) {
  const period = periodOf(nodeId);
  const week = /^(\d{4})-W(\d{2})$/.exec(period);
  if (week) {
    const jan4 = Date.UTC(Number(week[1]), 0, 4);
    const monday = jan4 - ((new Date(jan4).getUTCDay() + 6) % 7) * DAY_MS;
    return new Date(monday + (Number(week[2]) - 1) * 7 * DAY_MS);
  }
  const [y, m, d] = period.slice(0, 10).split("-").map(Number);
  return new Date(Date.UTC(y, (m || 1) - 1, d || 1));
}

/** A human label for a node's period, e.g. "March 2024", "Mon 18 Mar 2024", "10:02–10:47". */
export function periodLabel(node, short = false) {
  switch (node.level) {
    case "year":
      return periodOf(node.node_id);
    case "month":
      return monthFmt.format(idDate(node.node_id));
    case "week": {
      const monday = idDate(node.node_id);
      const sunday = new Date(monday.getTime() + 6 * DAY_MS);
      return periodOf(node.node_id) + " · " + (short ? spanFmt : dateFmt).formatRange(monday, sunday);
    }
    case "day":
      return (short ? shortDayFmt : dayFmt).format(idDate(node.node_id));
    case "segment": {
      // instants: the reader's own clock (a period's end is exclusive: its last instant)
      const start = new Date(node.start_time);
      const end = new Date(Math.max(start.getTime(), new Date(node.end_time).getTime() - 1));
      return timeFmt.format(start) + "–" + timeFmt.format(end);
    }
    default:
      return dateFmt.format(new Date(node.start_time));
  }
}

export function stamp(iso) {
  return iso ? stampFmt.format(new Date(iso)) : "";
}

export function clock(iso) {
  return iso ? timeFmt.format(new Date(iso)) : "";
}

export function plural(n, word) {
  return Number(n).toLocaleString() + " " + word + (n === 1 ? "" : "s");
}

/** Keyword chips (at most `max`). */
export function chips(keywords, max = 8) {
  const list = (keywords || []).slice(0, max);
  if (!list.length) return null;
  return h("ul", { class: "chips", "aria-label": "keywords" }, list.map((k) => h("li", { class: "chip", title: k }, k)));
}

/** A status line inside a container: kind is "info", "error" or "warn". */
export function notice(kind, text) {
  return h("p", { class: "notice notice-" + kind, role: kind === "error" ? "alert" : "status" }, text);
}

/**
 * What a result's text says after its title: a node's L0 and a grip's or recall item's text open
 * with the title (the grip's cut at a word, "…"), so showing both said it twice. Returns the text
 * unchanged when it does not open with the title.
 */
export function afterTitle(title, text) {
  const head = (title || "").replace(/…$/, "").trimEnd();
  let body = text || "";
  // said once or twice: a period's L0 is its title, then an abstract that may open with it again
  for (let i = 0; i < 2 && head && body.startsWith(head); i++) {
    body = body.slice(head.length).replace(/^[\s.:;,]+/, "");
  }
  return body;
}

/**
 * Whether a text opens with its title, after any leading "[2024-01-18]" / "[system]" tags (a
 * recalled item's text is whole, so a title it opens with only repeats it).
 */
export function opensWith(title, text) {
  const head = (title || "").replace(/…$/, "").trimEnd();
  return Boolean(head) && (text || "").replace(/^(\s*\[[^\]\n]{1,40}\])*\s*/, "").startsWith(head);
}

/**
 * A degraded mode in a few words (the full reason, often a library's error text, is in the
 * status panel and in the element's tooltip): "no embedder, BM25 only".
 */
export function shortReason(degraded) {
  return String(degraded || "").split("; ").map((part) => {
    if (part.startsWith("no embedder")) return "no embedder, BM25 only";
    if (part.startsWith("vectors stale") || part.startsWith("vectors missing")) return part.split(":")[0] + ", BM25 only";
    if (part.startsWith("vectors behind")) return part.split(" filed")[0];
    return part.length <= 80 ? part : part.slice(0, 79).replace(/\s+\S*$/, "") + "…";
  }).join("; ");
}

/** A warning span for a degraded mode: short text, the full reason on hover. */
export function degradedNote(degraded) {
  if (!degraded) return null;
  return h("span", { class: "warn-text", title: degraded, dataset: { testid: "degraded" } },
    " · " + shortReason(degraded) + " (see Status)");
}
