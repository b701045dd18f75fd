"""An evaluation's results and their renderings: rich table, JSON, Markdown, recall-vs-budget PNG.

The headline pair — shown overall and per category for every mode — is turn recall at ``k`` = 10
and recall within a 1,000-token budget (the nearest configured values when those are not run).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from rich.table import Table

from memtoc.eval.harness import OVERALL, EvalResults, RunConfig
from memtoc.model import JsonValue


def _nearest(values: tuple[int, ...], target: int) -> int:
    return min(values, key=lambda v: (abs(v - target), v))


@dataclass
class EvalReport:
    benchmark: str
    dataset: str
    command: str
    embedder: str
    counter: str
    config: RunConfig
    categories: list[str]
    results: EvalResults
    skipped_modes: dict[str, str]
    notes: list[str]
    wall_seconds: float
    stage_seconds: dict[str, float]
    projects: int
    date: str = field(default_factory=lambda: datetime.now(UTC).strftime("%Y-%m-%d"))

    @property
    def recall_name(self) -> str:
        return "turn_recall" if self.benchmark == "longmemeval" else "recall"

    @property
    def headline(self) -> tuple[str, str]:
        k = _nearest(self.config.ks, 10)
        budget = _nearest(self.config.budgets, 1_000)
        return f"{self.recall_name}@{k}", f"budget_recall@{budget}"

    def ordered_categories(self) -> list[str]:
        return self.results.categories(self.categories)

    def to_dict(self) -> dict[str, JsonValue]:
        summary = self.results.summary()
        return {
            "benchmark": self.benchmark,
            "dataset": self.dataset,
            "command": self.command,
            "date": self.date,
            "embedder": self.embedder,
            "token_counter": self.counter,
            "ks": list(self.config.ks),
            "budgets": list(self.config.budgets),
            "depth": self.config.request_k,
            "projects": self.projects,
            "modes": self.results.modes(),
            "skipped_modes": dict(self.skipped_modes),
            "categories": self.ordered_categories(),
            "summary": {
                m: {c: _rounded(v) for c, v in cats.items()} for m, cats in summary.items()
            },
            "latency": {m: _rounded(v) for m, v in self.results.latency().items()},
            "wall_seconds": round(self.wall_seconds, 2),
            "stage_seconds": _rounded(self.stage_seconds),
            "notes": list(self.notes),
        }


def _rounded(values: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 4) for k, v in values.items()}


def _pair(cell: dict[str, float] | None, names: tuple[str, str]) -> str:
    if not cell:
        return "-"
    return " / ".join(f"{cell[n]:.3f}" if n in cell else "-" for n in names)


def rich_table(report: EvalReport) -> Table:
    """Per mode: overall and per-category headline pair, tokens to read the top 10, latency."""
    summary = report.results.summary()
    latency = report.results.latency()
    names = report.headline
    cats = report.ordered_categories()
    tok = f"tokens@{_nearest(report.config.ks, 10)}"
    table = Table(title=f"{report.benchmark}: {names[0]} / {names[1]}", title_justify="left")
    table.add_column("mode", style="bold", no_wrap=True)
    table.add_column(OVERALL, justify="right")
    for c in cats:
        table.add_column(c, justify="right")
    table.add_column(tok, justify="right")
    table.add_column("p50 / p95 ms", justify="right")
    for mode in report.results.modes():
        row = summary[mode]
        lat = latency[mode]
        table.add_row(
            mode,
            _pair(row.get(OVERALL), names),
            *(_pair(row.get(c), names) for c in cats),
            f"{row[OVERALL].get(tok, 0.0):,.0f}",
            f"{lat['p50_ms']:.1f} / {lat['p95_ms']:.1f}",
        )
    return table


def markdown(report: EvalReport) -> str:
    """The report as Markdown: setup, headline table, full overall metrics, notes."""
    summary = report.results.summary()
    latency = report.results.latency()
    names = report.headline
    cats = report.ordered_categories()
    counts = {c: int(summary[m][c]["n"]) for m in summary for c in summary[m]}
    lines = [
        f"# {report.benchmark} retrieval evaluation",
        "",
        f"- date: {report.date}",
        f"- command: `{report.command}`" if report.command else "- command: (library call)",
        f"- dataset: `{report.dataset}` ({report.projects} projects, "
        f"{counts.get(OVERALL, 0):,} questions)",
        f"- embedder: {report.embedder}; token counter: {report.counter}",
        f"- wall time: {report.wall_seconds:.1f} s ("
        + ", ".join(f"{k} {v:.1f} s" for k, v in report.stage_seconds.items())
        + ")",
        "",
        f"## {names[0]} / {names[1]}",
        "",
        "| mode | " + " | ".join([f"{OVERALL} (n={counts.get(OVERALL, 0)})"]
                                + [f"{c} (n={counts.get(c, 0)})" for c in cats]) + " |",
        "| --- | " + " | ".join("---:" for _ in range(len(cats) + 1)) + " |",
    ]  # fmt: skip
    for mode in report.results.modes():
        row = summary[mode]
        cells = [_pair(row.get(OVERALL), names), *(_pair(row.get(c), names) for c in cats)]
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    metrics = [m for m in next(iter(summary.values()))[OVERALL] if m != "n"] if summary else []
    lines += ["", "## All metrics (overall)", ""]
    lines.append("| metric | " + " | ".join(report.results.modes()) + " |")
    lines.append("| --- | " + " | ".join("---:" for _ in report.results.modes()) + " |")
    for metric in metrics:
        vals = [summary[m][OVERALL].get(metric) for m in report.results.modes()]
        fmt = "{:,.0f}" if "tokens" in metric else "{:.3f}"
        lines.append(
            f"| {metric} | " + " | ".join("-" if v is None else fmt.format(v) for v in vals) + " |"
        )
    for stat in ("p50_ms", "p95_ms"):
        vals = [latency[m][stat] for m in report.results.modes()]
        lines.append(f"| latency {stat} | " + " | ".join(f"{v:.1f}" for v in vals) + " |")
    if report.skipped_modes:
        lines += ["", "## Modes not run", ""]
        lines += [f"- `{m}`: {why}" for m, why in report.skipped_modes.items()]
    if report.notes:
        lines += ["", "## Notes", ""]
        lines += [f"- {n}" for n in report.notes]
    return "\n".join(lines) + "\n"


def plot_recall_vs_budget(report: EvalReport, path: Path) -> None:
    """A PNG line chart: overall recall within each budget, one line per mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = report.results.summary()
    budgets = list(report.config.budgets)
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    for mode in report.results.modes():
        overall = summary[mode][OVERALL]
        ax.plot(budgets, [overall.get(f"budget_recall@{b}", 0.0) for b in budgets],
                marker="o", label=mode)  # fmt: skip
    ax.set_xlabel("token budget")
    ax.set_ylabel("evidence recall within budget")
    ax.set_xticks(budgets)
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.set_title(f"{report.benchmark}: recall vs budget ({report.embedder.split(' (')[0]})")
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_outputs(report: EvalReport, out: Path) -> dict[str, Path]:
    """``report.md``, ``recall_vs_budget.png``, ``results.json`` and per-question
    ``questions.jsonl`` in ``out`` (created); returns the paths by kind."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "markdown": out / "report.md",
        "chart": out / "recall_vs_budget.png",
        "json": out / "results.json",
        "questions": out / "questions.jsonl",
    }
    paths["markdown"].write_text(markdown(report), encoding="utf-8")
    plot_recall_vs_budget(report, paths["chart"])
    paths["json"].write_text(json.dumps(report.to_dict(), indent=2) + "\n", encoding="utf-8")
    with paths["questions"].open("w", encoding="utf-8") as fh:
        for score in report.results.scores:
            fh.write(json.dumps(score.to_dict()) + "\n")
    return paths
