"""memtoc's HTTP API (FastAPI): ``create_app`` builds it; ``memtoc serve`` runs it."""

from memtoc.surfaces.http.app import create_app

__all__ = ["create_app"]
