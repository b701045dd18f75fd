// The status panel: store counts, queue depth, backends, and every degraded mode in warning
// colour. Refreshed every 15 s while the tab is visible.

import { api } from "./api.js";
import { fill, h, notice, stamp } from "./dom.js";

const REFRESH_MS = 15000;

export class Status {
  /** @param {HTMLElement} root  @param {(err: Error) => void} onError */
  constructor(root, onError) {
    this.root = root;
    this.onError = onError;
    this.timer = null;
  }

  start() {
    this.refresh();
    this.timer = setInterval(() => {
      if (document.visibilityState === "visible") this.refresh();
    }, REFRESH_MS);
  }

  async refresh() {
    let s;
    try {
      s = await api.status();
    } catch (err) {
      fill(this.root, notice("error", "Status unavailable: " + err.message));
      this.onError(err);
      return;
    }
    const outbox = s.outbox || {};
    const daemon = s.daemon && typeof s.daemon === "object" ? s.daemon : null;
    const worker = daemon && typeof daemon.worker === "object" ? daemon.worker : null;
    const nodes = s.nodes || {};
    const levels = ["year", "month", "week", "day", "segment"].filter((l) => nodes[l]);
    const rows = [
      ["Events", num(s.events)],
      ["Sessions", num(s.sessions)],
      ["Projects", num(s.projects)],
      ["Nodes", levels.map((l) => num(nodes[l]) + " " + l + (nodes[l] === 1 ? "" : "s")).join(", ") || "none"],
      ["Queue", num(s.queue_depth ?? outbox.pending) + " pending" + (outbox.failed ? ", " + outbox.failed + " failed" : "")],
      ["Summariser", s.summarizer],
      ["Embedder", s.embedder || "none"],
      ["Tokens", s.token_counter],
      ["Store", (s.store || "") + (s.location ? " · " + s.location : "")],
    ];
    if (s.last_event_ms) rows.push(["Last event", stamp(new Date(s.last_event_ms).toISOString())]);
    const rolled = Object.values(s.rollups || {}).map((r) => r?.last_run_ms || 0);
    if (rolled.length && Math.max(...rolled)) rows.push(["Last rollup", stamp(new Date(Math.max(...rolled)).toISOString())]);
    const processing = daemon && typeof daemon.processing === "object" ? daemon.processing : null;
    if (daemon) rows.push(["Daemon", "memtoc serve, pid " + show(daemon.pid)]);
    if (worker) {
      const when = worker.last_round_ms ? " · last round " + stamp(new Date(worker.last_round_ms).toISOString()) : "";
      rows.push(["Worker", show(worker.state) + " · " + num(worker.events_filed) + " events filed" + when]);
    } else if (processing && processing.by === "other-process") {
      rows.push(["Worker", "memtoc " + show(processing.role) + ", pid " + show(processing.pid) + " (this daemon takes over when it stops)"]);
    } else {
      rows.push(["Worker", "none (run memtoc serve, memtoc mcp or memtoc process)"]);
    }
    fill(this.root,
      h("dl", { class: "stats" }, rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
      this.warnings(s, worker));
  }

  warnings(s, worker) {
    const out = [];
    if (worker && !worker.running) out.push("The worker is not running (" + show(worker.state) + ")");
    if (worker?.last_error) out.push("Worker error: " + worker.last_error);
    if (s.embedder_degraded) out.push("Search is BM25-only: " + s.embedder_degraded);
    if (s.token_counter_degraded) out.push("Token counts are approximate (" + s.token_counter + ")");
    // an LLM summariser configured but not loaded: everything is extractive
    const configured = s.summarizer_configured;
    if (configured && configured !== "extractive" && String(s.summarizer || "").startsWith("extractive"))
      out.push("Summariser " + configured + " is not in use; nodes are built by " + s.summarizer);
    // loaded, but its calls failed: the extractive fallback wrote these nodes
    const sums = s.summaries || {};
    if (sums.degraded)
      out.push(num(sums.degraded) + " of " + num(sums.nodes) + " summaries built by the extractive fallback: " +
        show(sums.degraded_reason) + (sums.hint ? " (" + sums.hint + ")" : ""));
    if (sums.other_backend)
      out.push(num(sums.other_backend) + " summaries not by the configured summariser" + (sums.hint ? " (" + sums.hint + ")" : ""));
    const failures = s.failures || {};
    for (const f of failures.outbox || []) out.push("Outbox failure: " + f);
    for (const f of failures.segments || []) out.push("Segment failure: " + f);
    if (!out.length) return h("p", { class: "ok-text", dataset: { testid: "status-ok" } }, "✓ All backends running normally.");
    return h("ul", { class: "warnings", role: "alert", dataset: { testid: "status-warnings" } },
      out.map((w) => h("li", {}, "⚠ " + w)));
  }
}

function num(n) {
  return n === undefined || n === null ? "–" : Number(n).toLocaleString();
}

function show(value) {
  if (value === null || value === undefined) return "–";
  if (typeof value === "boolean") return value ? "yes" : "no";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}
