"""Derived data kept true to the events: ``verify`` checks it, ``rebuild`` re-derives it.

``verify`` (``memtoc.derived.verify`` plus the store's SQL audit) and ``rebuild``
(``memtoc.derived.rebuild``: segments, summaries, grips, bookmarks, search documents, BM25, vectors;
by part or all) sit above the pipeline and retrieval layers, whose code they reuse, so a rebuild
derives exactly what the pipeline would have derived from the same events.
"""
