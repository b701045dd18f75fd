"""Scorers: one question's retrieved items → its metrics (names as they appear in reports).

Turn metrics (both benchmarks; gold = the question's gold turns):

- ``recall@k``: evidence recall among the first ``k`` distinct turns;
- ``budget_recall@B``: evidence recall within a ``B``-token context (``metrics.budget_cut``);
- ``budget_tokens@B``: tokens that context used;
- ``tokens@k``: tokens of the fewest leading items that cover ``k`` distinct turns (all items if
  they cover fewer) — what reading the top ``k`` costs with this mode.

Session metrics: LoCoMo reports ``session_recall@k`` (fraction of gold sessions among the first
``k`` distinct sessions); LongMemEval reports ``recall_any@k``, ``recall_all@k`` and ``ndcg@k`` at
session level, as its paper does, and names its turn recall ``turn_recall@k``.
"""

from __future__ import annotations

from collections.abc import Sequence

from memtoc.eval.harness import EvalProject, EvalQuery, RunConfig
from memtoc.eval.metrics import (
    budget_cut,
    dedupe,
    ndcg_at_k,
    ranked_events,
    recall_all_at_k,
    recall_any_at_k,
    recall_at_k,
    sessions_of,
)
from memtoc.eval.modes import RetrievedItem


def tokens_to_cover(items: Sequence[RetrievedItem], k: int) -> int:
    """Tokens of the fewest leading items whose events include ``k`` distinct turns."""
    seen: set[str] = set()
    used = 0
    for item in items:
        if len(seen) >= k:
            break
        used += item.tokens
        seen.update(item.event_ids)
    return used


def _turn_metrics(
    q: EvalQuery,
    items: Sequence[RetrievedItem],
    project: EvalProject,
    cfg: RunConfig,
    recall_name: str,
) -> dict[str, float]:
    ranked = ranked_events(items)
    out: dict[str, float] = {}
    gold = set(q.gold)
    for k in cfg.ks:
        out[f"{recall_name}@{k}"] = recall_at_k(ranked, gold, k)
    for budget in cfg.budgets:
        cut = budget_cut(items, budget, project.memory.counter, project.event_text)
        out[f"budget_recall@{budget}"] = len(gold & set(cut.event_ids)) / len(gold)
        out[f"budget_tokens@{budget}"] = float(cut.tokens)
    for k in cfg.ks:
        out[f"tokens@{k}"] = float(tokens_to_cover(items, k))
    return out


def score_locomo(
    q: EvalQuery, items: Sequence[RetrievedItem], project: EvalProject, cfg: RunConfig
) -> dict[str, float]:
    """Turn metrics plus ``session_recall@k``."""
    out = _turn_metrics(q, items, project, cfg, "recall")
    sessions = sessions_of(ranked_events(items), project.session_of)
    for k in cfg.ks:
        out[f"session_recall@{k}"] = recall_at_k(sessions, q.gold_sessions, k)
    return out


def score_longmemeval(
    q: EvalQuery, items: Sequence[RetrievedItem], project: EvalProject, cfg: RunConfig
) -> dict[str, float]:
    """Session ``recall_any@k``, ``recall_all@k``, ``ndcg@k``; turn metrics when the question
    has gold turns (``has_answer``)."""
    sessions = dedupe(sessions_of(ranked_events(items), project.session_of))
    out: dict[str, float] = {}
    for k in cfg.ks:
        out[f"recall_any@{k}"] = recall_any_at_k(sessions, q.gold_sessions, k)
        out[f"recall_all@{k}"] = recall_all_at_k(sessions, q.gold_sessions, k)
        out[f"ndcg@{k}"] = ndcg_at_k(sessions, q.gold_sessions, k)
    if q.gold:
        out.update(_turn_metrics(q, items, project, cfg, "turn_recall"))
    return out
