"""PostgreSQL full text at size: BM25 statistics read cheaply (estimates for common lexemes, exact
counts for rare ones, sampled averages on big indexes), two round trips per search, both candidate
plans ranking alike, and connections going back to the pool without advisory locks.

The index is filled the way the pipeline fills it (``event_search`` rows from the events' text) so
6,100 rows take a second instead of a pipeline run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from memtoc.errors import StoreError
from memtoc.model import Event
from memtoc.store.capabilities import TextScope
from memtoc.store.postgres import PostgresStore
from memtoc.store.postgres import search as postgres_search
from memtoc.store.postgres import text_stats as postgres_text_stats
from memtoc.store.postgres.text_index import EVENT_UPSERT, event_params
from memtoc.store.postgres.text_stats import ESTIMATE_ABOVE, index_stats, terms

BASE = 1_705_312_800_000
ALL = ("node", "grip", "bookmark", "event")


def _event(i: int, text: str) -> Event:
    return Event(f"e{i:06d}", f"s{i // 50}", "alpha", "a", BASE + i * 1_000, "user_message",
                 "user", text)  # fmt: skip


def _text(i: int) -> str:
    words = ["rollout"] if i % 10 else []  # 90% of the rows
    words += ["rollback"] if i % 100 == 0 else []
    words += ["zanzibar"] if i == 4_321 else []
    return " ".join([*words, f"ticket{i}", "window", "window" if i % 2 else "canary"])


def _fill(store: PostgresStore, first: int, count: int, text: Any = _text) -> None:
    store.append_events([_event(i, text(i)) for i in range(first, first + count)])
    rows = store._query(
        "SELECT seq, project, text FROM events e WHERE NOT EXISTS "
        "(SELECT 1 FROM event_search x WHERE x.seq = e.seq) ORDER BY seq"
    )
    store._exec(EVENT_UPSERT, event_params(*zip(*rows, strict=True)))


@pytest.fixture
def store(pg_url: str) -> Iterator[PostgresStore]:
    s = PostgresStore(pg_url, pool_size=2)
    _fill(s, 0, 6_000)
    s._exec("ANALYZE event_search")
    yield s
    s.close()


def test_common_lexemes_are_estimated_rare_ones_counted(store: PostgresStore) -> None:
    _fill(store, 6_000, 100, lambda i: f"ticket{i} late")  # the statistics still say 90% "rollout"
    store._bm25_stats.clear()
    got = {
        lex: df
        for lex, _, df in terms(store, ["rollout", "rollback", "zanzibar"], ("event_search",))
    }
    exact = store._query("SELECT COUNT(*) FROM event_search WHERE tsv @@ 'rollout'::tsquery")[0][0]
    assert exact == 5_400 > ESTIMATE_ABOVE
    assert got["rollout"] == pytest.approx(0.9 * 6_100, rel=0.01)  # frequency x rows, not a count
    assert got["rollback"] == 60 and got["zanzibar"] == 1  # rare: counted exactly
    assert [t[1] for t in terms(store, ["rollout"], ("event_search",))] == [-1]  # docs not asked


def test_text_indexes_keep_a_short_pending_list(store: PostgresStore) -> None:
    rows = store._query(
        "SELECT c.relname, c.reloptions FROM pg_class c WHERE c.relname IN "
        "('docs_tsv', 'event_search_tsv') ORDER BY 1"
    )
    assert [(r[0], r[1]) for r in rows] == [
        ("docs_tsv", ["gin_pending_list_limit=256"]),
        ("event_search_tsv", ["gin_pending_list_limit=256"]),
    ]


def test_counts_stop_at_the_cap_and_say_more(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres_text_stats, "ESTIMATE_ABOVE", 10**9)  # as with no statistics
    monkeypatch.setattr(postgres_text_stats, "DF_CAP", 1_000)
    got = {lex: df for lex, _, df in terms(store, ["rollout", "rollback"], ("event_search",))}
    assert got == {"rollout": 1_001, "rollback": 60}
    plans = store.rank_text("rollout window", kinds=("event",), scope=TextScope(), candidates=5)
    monkeypatch.setattr(postgres_text_stats, "DF_CAP", 50_000)
    assert (
        store.rank_text("rollout window", kinds=("event",), scope=TextScope(), candidates=5)[0][2]
        == plans[0][2]
    )


def test_big_indexes_are_measured_by_sample(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    exact = index_stats(store, "event_search")
    assert exact[0] == 6_000
    store._bm25_stats.clear()
    monkeypatch.setattr(postgres_text_stats, "SAMPLE_ABOVE", 1_000)
    monkeypatch.setattr(postgres_text_stats, "SAMPLE_ROWS", 2_000)
    rows, avgdl = index_stats(store, "event_search")
    assert rows == pytest.approx(6_000, rel=0.02)  # the server's estimate after ANALYZE
    assert avgdl == pytest.approx(exact[1], rel=0.1)


def test_search_is_at_most_two_statements_and_both_plans_rank_alike(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    for name in ("_query", "_query_planned"):
        real = getattr(store, name)

        def counted(*args: Any, _real: Any = real) -> Any:
            calls.append(args[0])
            return _real(*args)

        monkeypatch.setattr(store, name, counted)
    queries = ["rollout window", "rollback canary window ticket4321", "zanzibar rollout", "window"]
    store.rank_text("warm the statistics", kinds=ALL, scope=TextScope())
    found = []
    for query in queries:
        calls.clear()
        rows = store.rank_text(query, kinds=ALL, scope=TextScope(), candidates=20)
        assert len(calls) == 2, calls  # the rare lexemes' counts, then every pass of both indexes
        assert rows and all(0.0 <= r[4] <= 1.0 for r in rows)
        found.append(rows)
    calls.clear()  # the statistics estimate both lexemes in events: nothing to count
    assert store.rank_text("rollout window", kinds=("event",), scope=TextScope(), candidates=20)
    assert len(calls) == 1, calls
    # "rollout window" matches 5,400 rows: only the newest SCAN_CAP are ranked, by either plan
    monkeypatch.setattr(postgres_search, "BITMAP_ROWS", -1)  # always walk the newest rows
    assert [
        store.rank_text(q, kinds=ALL, scope=TextScope(), candidates=20) for q in queries
    ] == found
    monkeypatch.setattr(postgres_search, "BITMAP_ROWS", 10**9)  # always take the GIN bitmap
    assert [
        store.rank_text(q, kinds=ALL, scope=TextScope(), candidates=20) for q in queries
    ] == found
    # a pass that can match at most the rows it scores takes them unsorted, as the index hands
    # them over: the same rows and scores as the newest-first plan
    groups = [(("rollback",),), (("zanzibar",),)]
    weights = store._weights("event_search", ["rollback", "zanzibar"], [60, 1], [1, 1], groups)
    assert any(
        postgres_search._every_match(p[1], p[2]) for p in postgres_search._passes(weights, 5_000)
    )
    monkeypatch.setattr(postgres_search, "_every_match", lambda bound, cap: False)
    assert [
        store.rank_text(q, kinds=ALL, scope=TextScope(), candidates=20) for q in queries
    ] == found
    rare = store.rank_text("zanzibar rollout", kinds=("event",), scope=TextScope())
    assert rare[0][2] == "e004321" and rare[0][4] == 1.0


def test_connections_return_to_the_pool_without_advisory_locks(pg_url: str) -> None:
    store = PostgresStore(pg_url, pool_size=1)
    try:
        with psycopg.connect(pg_url, autocommit=True) as probe:

            def advisory_locks() -> int:
                row = probe.execute(
                    "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' "
                    "AND database = (SELECT oid FROM pg_database WHERE datname = "
                    "current_database())"
                ).fetchone()
                return int(row[0]) if row else -1

            store.append_events([_event(1, "first")])
            assert advisory_locks() == 0
            # A real error inside the INSERT, under the append lock: a trigger the database runs
            # (the store's own checks refuse bad rows before the INSERT, so none can reach it).
            probe.execute(
                "CREATE FUNCTION refuse_marked() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "IF NEW.text = 'refused' THEN RAISE EXCEPTION 'refused by the test'; END IF; "
                "RETURN NEW; END $$"
            )
            probe.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON events FOR EACH ROW "
                "EXECUTE FUNCTION refuse_marked()"
            )
            with pytest.raises(StoreError, match="refused by the test"):
                store.append_events([_event(2, "second"), _event(3, "refused")])
            assert advisory_locks() == 0
            assert store.count_events() == 1  # the failed batch left nothing behind
            assert store.append_events([_event(4, "after")]).inserted == 1  # not blocked
            assert advisory_locks() == 0
    finally:
        store.close()


def test_long_rows_are_stored_uncompressed_and_a_migration_rewrites_old_ones(
    pg_url: str,
) -> None:
    """Ranking reads every candidate's ``tsv``: a row past about 2 kB was compressed in place and
    decompressed again by every search (migration ``0012_tsv_uncompressed``). Such rows are now
    stored plain; a store written before has its compressed rows rewritten when opened, and it
    ranks exactly as before."""
    long_text = " ".join(f"deploy{i % 80} step{i % 7}" for i in range(1_600))  # a 5 kB tsvector

    def compressed(s: PostgresStore) -> list[Any]:
        return [r[0] for r in s._query(
            "SELECT pg_column_compression(tsv) FROM event_search ORDER BY seq")]  # fmt: skip

    s = PostgresStore(pg_url, pool_size=1)
    try:
        _fill(s, 0, 3, lambda i: long_text if i == 1 else f"deploy{i} short row")
        assert s._query("SELECT pg_column_size(tsv) FROM event_search ORDER BY seq")[1][0] > 4_000
        assert compressed(s) == [None, None, None]
        ranked = s.rank_text("deploy1 step3", kinds=("event",), scope=TextScope())
        # as a store written before 0012: the row compressed in place
        s._exec("ALTER TABLE event_search RESET (toast_tuple_target)")
        s._exec("UPDATE event_search SET tsv = tsv || ''::tsvector")
        assert compressed(s) == [None, "pglz", None]
        s._exec("DELETE FROM schema_migrations WHERE name = '0012_tsv_uncompressed'")
    finally:
        s.close()
    s = PostgresStore(pg_url, pool_size=1)
    try:
        assert compressed(s) == [None, None, None]
        assert s.rank_text("deploy1 step3", kinds=("event",), scope=TextScope()) == ranked
    finally:
        s.close()
