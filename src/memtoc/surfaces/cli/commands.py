"""Imports every command module so its commands register on the app."""

from memtoc.surfaces.cli import (
    bench_cmds,
    bookmark_cmds,  # memtoc bookmarks list|refresh
    bookmark_eval_cmds,  # memtoc eval bookmarks
    context_cmds,  # session-start context
    demo,
    eval_cmds,  # memtoc eval locomo|longmemeval
    forget_cmds,  # memtoc forget, memtoc forget-log
    hook_cmds,  # memtoc hooks install|uninstall, memtoc hook session-start|ingest, memtoc watch
    mcp_cmds,  # MCP server
    migrate_cmds,  # memtoc migrate-store (SQLite → PostgreSQL)
    projects_cmds,  # memtoc projects list|rename|merge
    quality_cmds,  # memtoc eval summaries
    recall_cmds,  # memtoc recall (budgeted context)
    redaction_eval_cmds,  # memtoc eval redaction
    search_cmds,  # memtoc search, memtoc rebuild
    serve_cmds,  # memtoc serve (daemon: worker, rollups, HTTP API, web UI), memtoc token
    status_cmds,  # memtoc status
    store_cmds,
    toc_cmds,
)

__all__ = [
    "bench_cmds",
    "bookmark_cmds",
    "bookmark_eval_cmds",
    "context_cmds",
    "demo",
    "eval_cmds",
    "forget_cmds",
    "hook_cmds",
    "mcp_cmds",
    "migrate_cmds",
    "projects_cmds",
    "quality_cmds",
    "recall_cmds",
    "redaction_eval_cmds",
    "search_cmds",
    "serve_cmds",
    "status_cmds",
    "store_cmds",
    "toc_cmds",
]
