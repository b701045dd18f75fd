"""``memtoc eval coding`` output: Markdown tables, a rich table, a PNG chart, JSON and JSONL files.

- ``report.md``: per budget, the answered share of every method overall and per category (with
  counts), latency, the checks (budget, citations, gold not in store) and notes;
- ``summary.json``: the same figures (``CodingRun.summary``);
- ``questions.jsonl``: one line per question — its gold, which stored events hold each quote, and
  per method the rank of the best gold event in its ranking and, per budget, whether it answered,
  the item holding each quote, tokens, items and latency — so misses can be read one by one;
- ``questions.md``: the same per question as one table line (answered marks, gold ranks);
- ``answered_vs_budget.png``: answered share against budget, one line per method.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.table import Table

from memtoc.eval.coding_run import OVERALL, CodingRun, output_paths
from memtoc.model import JsonValue


def _pct(hits: int, asked: int) -> str:
    return f"{100.0 * hits / asked:.1f}" if asked else "-"


def markdown(run: CodingRun) -> str:
    cats = run.categories()
    counts = (
        {c: run.answered(run.methods[0], run.budgets[0], c)[1] for c in [OVERALL, *cats]}
        if (run.methods)
        else {}
    )
    lines = [
        f"# memtoc eval coding: {run.corpus.name}",
        "",
        f"- date: {run.date}",
        f"- command: `{run.command}`" if run.command else "- command: (library call)",
        f"- corpus: `{run.corpus.root}` ({len(run.rows)} questions, {run.store_events:,} events)",
        f"- embedder: {run.embedder}; token counter: {run.counter}; time zone: {run.timezone}",
        "- scoring: a question is answered when its gold quote(s) (`need` any/all) lie whole, "
        "whitespace-normalised and case-insensitive, inside one returned item's text",
        "- baselines pack whole events by rank; an event too long for what is left is skipped "
        "(so a larger budget can hold a long top event instead of several short ones)",
        f"- recall's time limit: {run.time_limit}",
        "",
    ]
    for b in run.budgets:
        lines += [
            f"## Answered within {b:,} tokens (%)",
            "",
            "| method | " + " | ".join(f"{c} (n={counts.get(c, 0)})" for c in [OVERALL, *cats])
            + " | mean tokens | p50 / p95 ms |",
            "| --- | " + " | ".join("---:" for _ in range(len(cats) + 3)) + " |",
        ]  # fmt: skip
        for m in run.methods:
            cells = [_pct(*run.answered(m, b, c)) for c in [OVERALL, *cats]]
            lat = run.latency(m, b)
            lines.append(
                f"| {m} | " + " | ".join(cells)
                + f" | {run.mean_tokens(m, b):,.0f} | {lat['p50_ms']:.1f} / {lat['p95_ms']:.1f} |"
            )  # fmt: skip
        lines.append("")
    lines += ["## Latency over all budgets (ms)", "", "| method | p50 | p95 | mean |",
              "| --- | ---: | ---: | ---: |"]  # fmt: skip
    for m in run.methods:
        lat = run.latency(m)
        lines.append(f"| {m} | {lat['p50_ms']:.1f} | {lat['p95_ms']:.1f} | {lat['mean_ms']:.1f} |")
    budget_v = sum(v.kind == "budget" for v in run.violations)
    cite_v = sum(v.kind == "citation" for v in run.violations)
    missing = run.gold_not_in_store()
    lines += [
        "",
        "## Checks",
        "",
        f"- budget exceeded: {budget_v}",
        f"- citations not resolving in the store: {cite_v}",
        f"- gold quotes not in any stored event (importer defects): {len(missing)}",
    ]
    lines += [
        f"  - {v.kind} {v.qid} {v.method}@{v.budget}: {v.detail}" for v in run.violations[:20]
    ]
    lines += [f"  - {g['id']} gold[{g['quote']}]: {str(g['text'])[:100]!r}" for g in missing[:30]]
    truncated = {f"{m}@{b}": n for (m, b), n in run.truncated.items() if n}
    if truncated:
        lines.append(f"- recall calls stopped by the time limit: {truncated}")
    for m, why in run.degraded.items():
        lines.append(f"- {m} degraded: {why}")
    if run.skipped_methods:
        lines += ["", "## Methods not run", ""]
        lines += [f"- `{m}`: {why}" for m, why in run.skipped_methods.items()]
    if run.notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in run.notes]
    lines += ["", "Seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in run.seconds.items())]
    return "\n".join(lines) + "\n"


def _marks(cells: dict[str, JsonValue], budgets: tuple[int, ...]) -> str:
    out = ""
    for b in budgets:
        cell = cells.get(str(b))
        out += "✓" if isinstance(cell, dict) and cell.get("answered") else "·"
    return out


def question_table(run: CodingRun) -> str:
    """One line per question: per method, answered at each budget (✓/·) and the rank of the
    best event holding each gold quote in its ranking (— when absent): misses to read."""
    head = ["id", "category", "need", "in store"]
    lines = [
        f"# {run.corpus.name}: question by question",
        "",
        f"Marks: answered (✓) or not (·) at {', '.join(f'{b:,}' for b in run.budgets)} tokens; "
        "then, per gold quote, the rank of the best event holding it in the method's ranking.",
        "",
        "| " + " | ".join(head + run.methods) + " | question |",
        "| " + " | ".join("---" for _ in head + run.methods) + " | --- |",
    ]
    for row in run.rows:
        methods = row["methods"]
        assert isinstance(methods, dict)
        in_store = row["gold_in_store"]
        assert isinstance(in_store, list)
        cells = []
        for m in run.methods:
            entry = methods.get(m)
            if not isinstance(entry, dict):
                cells.append("-")
                continue
            budgets, ranks = entry["budgets"], entry["rank"]
            assert isinstance(budgets, dict) and isinstance(ranks, list)
            shown = ",".join("—" if r is None else str(r) for r in ranks)
            cells.append(f"{_marks(budgets, run.budgets)} r{shown}")
        stored = "".join("✓" if ok else "✗" for ok in in_store)
        text = str(row["question"]).replace("|", "/")
        lines.append(f"| {row['id']} | {row['category']} | {row['need']} | {stored} | "
                     + " | ".join(cells) + f" | {text} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def rich_table(run: CodingRun) -> Table:
    """Answered share (%) per method: overall at each budget, then per category at 1,000."""
    mid = min(run.budgets, key=lambda b: (abs(b - 1_000), b))
    cats = run.categories()
    table = Table(title=f"eval coding {run.corpus.name}: answered % ({len(run.rows)} questions)",
                  title_justify="left")  # fmt: skip
    table.add_column("method", style="bold", no_wrap=True)
    for b in run.budgets:
        table.add_column(f"@{b}", justify="right")
    for c in cats:
        table.add_column(f"{c}@{mid}", justify="right")
    table.add_column(f"p50/p95 ms @{mid}", justify="right")
    for m in run.methods:
        lat = run.latency(m, mid)
        table.add_row(
            m,
            *(_pct(*run.answered(m, b)) for b in run.budgets),
            *(_pct(*run.answered(m, mid, c)) for c in cats),
            f"{lat['p50_ms']:.0f} / {lat['p95_ms']:.0f}",
        )
    return table


def chart(run: CodingRun, path: Path) -> None:
    """Answered share against budget, one line per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    try:
        budgets = list(run.budgets)
        for m in run.methods:
            shares = []
            for b in budgets:
                hits, asked = run.answered(m, b)
                shares.append(hits / asked if asked else 0.0)
            ax.plot(budgets, shares, marker="o", label=m, linewidth=2.5 if m == "recall" else 1.5)
        ax.set_xlabel("token budget")
        ax.set_ylabel("questions answered (gold quote in one returned item)")
        ax.set_xticks(budgets)
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
        ax.set_title(f"eval coding {run.corpus.name} ({len(run.rows)} questions)")
        ax.legend(loc="upper left", fontsize="small")
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)


def write_outputs(run: CodingRun, out: Path) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = output_paths(out)
    with paths["questions"].open("w", encoding="utf-8") as fh:
        for row in run.rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    paths["summary"].write_text(json.dumps(run.summary(), indent=2, ensure_ascii=False) + "\n",
                                encoding="utf-8")  # fmt: skip
    paths["report"].write_text(markdown(run), encoding="utf-8")
    paths["by_question"].write_text(question_table(run), encoding="utf-8")
    chart(run, paths["chart"])
    return paths
