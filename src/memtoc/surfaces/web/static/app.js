// The page's entry module: wires the project picker, tree, detail pane, search, recall and status
// panel together, keeps `#project=…&node=…` in the address bar for links, and handles 401s.

import { ApiError, adoptTokenFromHash, api, hasToken, setToken } from "./api.js";
import { Bookmarks } from "./bookmarks.js";
import { Detail } from "./detail.js";
import { fill, h, notice } from "./dom.js";
import { Recall } from "./recall.js";
import { Search, nodeOfItem } from "./search.js";
import { Status } from "./status.js";
import { Tree } from "./tree.js";

const $ = (sel) => document.querySelector(sel);

const state = { project: null };
const params = adoptTokenFromHash();

const banner = $("#banner");
const picker = $("#project");
const tree = new Tree($("#tree"), (id) => openNode(id));
const detail = new Detail($("#detail"), (id) => openNode(id));
const status = new Status($("#status"), handleError);
new Search($("#search"), $("#search-panel"), () => state.project, openItem);
new Recall($("#recall"), $("#recall-out"), () => state.project);
const bookmarks = new Bookmarks($("#bookmarks"), openEvent);

/** Show why the page cannot load data; on 401, offer to paste a token. */
function handleError(err) {
  if (err instanceof ApiError && err.status === 401) {
    const input = h("input", { id: "token-input", type: "password", autocomplete: "off", "aria-label": "Access token" });
    banner.hidden = false;
    fill(banner, h("form", { class: "auth", dataset: { testid: "auth-error" }, onsubmit: (ev) => {
      ev.preventDefault();
      if (!input.value.trim()) return;
      setToken(input.value);
      location.reload();
    } },
      h("p", {}, h("strong", {}, "Not authorised. "),
        hasToken() ? "The access token was refused. " : "This page needs the server's access token. ",
        "Open the address printed by ", h("code", {}, "memtoc serve"), " (it ends in ",
        h("code", {}, "#token=…"), "), or paste the token from ", h("code", {}, "memtoc token"), ":"),
      input, h("button", { type: "submit" }, "Use token")));
    return true;
  }
  if (err instanceof ApiError && err.status === 0) {
    banner.hidden = false;
    fill(banner, notice("error", err.message));
    return true;
  }
  return false;
}

async function run(task, where) {
  try {
    return await task();
  } catch (err) {
    if (!handleError(err)) fill(where, notice("error", err.message));
    return null;
  }
}

/**
 * The node and its ancestors, root first (each as its node dict). A week can lie in two months
 * (parent_ids): the one containing the opened node's start is taken, so a day of 31 August is
 * shown under August even when its week runs into September.
 */
async function ancestry(id, project) {
  const chain = [];
  let next = id;
  let at = null;
  while (next && chain.length < 6) {
    const view = await api.node(next, project, "L0");
    const node = view.node;
    chain.unshift(node);
    if (at === null) at = Date.parse(node.start_time);
    next = await parentContaining(node, at, project);
  }
  return chain;
}

async function parentContaining(node, at, project) {
  const ids = node.parent_ids && node.parent_ids.length ? node.parent_ids : [node.parent_id];
  if (ids.length < 2) return ids[0] || null;
  for (const pid of ids) {
    const parent = (await api.node(pid, project, "L0")).node;
    if (Date.parse(parent.start_time) <= at && at < Date.parse(parent.end_time)) return pid;
  }
  return ids[0];
}

let opening = 0; // only the latest openNode renders (a slow earlier one must not win)

/** Show node `id` of `project` (default: the current one) and reveal it in the tree. */
async function openNode(id, project = state.project) {
  const ticket = ++opening;
  const current = () => ticket === opening;
  const pane = $("#detail");
  pane.setAttribute("aria-busy", "true");
  await run(async () => {
    const chain = await ancestry(id, project);
    if (!current()) return;
    if (project && project !== state.project) await selectProject(project);
    if (!(await detail.show(id, state.project, chain, current))) return;
    await tree.reveal(chain.map((n) => n.node_id));
    history.replaceState(null, "", "#" + new URLSearchParams({ project: state.project, node: id }));
  }, pane);
  if (current()) pane.removeAttribute("aria-busy");
}

async function openItem(item) {
  const project = item.project || state.project;
  await openNode(await nodeOfItem(item, project), project);
}

/** Open the segment an event (a bookmark's first) is filed under. */
async function openEvent(eventId) {
  const view = await api.grip(eventId, 0, 0);
  if (!view.toc_node_id) throw new Error("its event is not filed into the TOC yet");
  await openNode(view.toc_node_id);
}

async function selectProject(project) {
  state.project = project;
  picker.value = project;
  bookmarks.load(project);
  await run(() => tree.load(project), $("#tree"));
}

async function start() {
  status.start();
  detail.empty();
  const data = await run(() => api.projects(), $("#tree"));
  if (!data) return;
  const projects = (data.projects || []).slice().sort((a, b) => (b.events || 0) - (a.events || 0));
  fill(picker, projects.map((p) => h("option", { value: p.project },
    (p.name || p.project) + (p.events !== undefined ? " (" + Number(p.events).toLocaleString() + ")" : ""))));
  if (!projects.length) {
    fill($("#tree"), notice("info", "The store holds no events yet: run `memtoc ingest` or `memtoc demo`."));
    return;
  }
  const wanted = params.get("project");
  const initial = projects.some((p) => p.project === wanted) ? wanted : projects[0].project;
  await selectProject(initial);
  // A deep link opens its node; otherwise the latest year, so the page starts with a summary.
  if (params.get("node")) await openNode(params.get("node"));
  else await openLatest();
}

/** Open the project's most recent year (the detail pane is never blank when there is a TOC). */
async function openLatest() {
  const years = [...tree.root.querySelectorAll(".tree > li > .row [data-level=year]")];
  if (!years.length) return detail.empty();
  const id = years[years.length - 1].dataset.nodeId;
  await openNode(id);
  await tree.toggle(id, true);
}

picker.addEventListener("change", async () => {
  await selectProject(picker.value);
  await openLatest();
});

document.addEventListener("keydown", (ev) => {
  // "/" focuses the search box, as on many sites (not while typing in a field).
  if (ev.key === "/" && !/^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement?.tagName || "")) {
    ev.preventDefault();
    $("#search").elements.q.focus();
  }
});

start();
