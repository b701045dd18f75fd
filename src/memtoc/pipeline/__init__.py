"""The pipeline: outbox worker, segments, summaries, grips and TOC rollups."""
