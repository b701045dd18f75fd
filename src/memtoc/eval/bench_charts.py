"""Charts of ``memtoc bench`` results against history size N (matplotlib, PNG, log-scaled N).

One helper draws every bench chart — a line per series, N on a log x axis — so ingest, process
and query charts look alike and are read alike: ingest and process plot throughput (events/s,
memtoc beside its same-run baseline), query plots p95 latency per mode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

Points = Sequence[tuple[float, float]]


def line_chart(
    path: Path,
    series: Mapping[str, Points],
    *,
    title: str,
    ylabel: str,
    log_y: bool = False,
    dashed: Mapping[str, Points] | None = None,
    dashed_label: str = "",
) -> Path:
    """Draw ``series`` (label → ``(N, value)`` points) to ``path``; empty series are left out.
    ``dashed`` adds a second line per label, dashed in the same colour (``dashed_label`` names
    it once in the legend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    try:
        for label, points in series.items():
            if points:
                xs, ys = zip(*sorted(points), strict=True)
                (line,) = ax.plot(xs, ys, marker="o", label=label)
                second = (dashed or {}).get(label)
                if second:
                    xs, ys = zip(*sorted(second), strict=True)
                    ax.plot(xs, ys, marker=".", linestyle="--", color=line.get_color())
        if dashed and dashed_label:
            ax.plot([], [], linestyle="--", color="grey", label=dashed_label)
        ax.set_xscale("log")
        if log_y:
            ax.set_yscale("log")
        ax.set_xlabel("events in the store (N)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(path, dpi=120)
    finally:
        plt.close(fig)
    return path


def _num(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number in the bench results, got {value!r}")
    return float(value)


def ingest_chart(results: Sequence[Mapping[str, object]], out_dir: Path) -> Path:
    """Events/s against N for memtoc and the raw-SQLite baseline → ``ingest_throughput.png``."""
    series: dict[str, list[tuple[float, float]]] = {"memtoc": [], "raw SQLite baseline": []}
    for r in results:
        n = _num(r["events"])
        for label, side in (("memtoc", "memtoc"), ("raw SQLite baseline", "baseline")):
            figures = r[side]
            assert isinstance(figures, Mapping)
            series[label].append((n, _num(figures["events_per_s"])))
    return line_chart(
        out_dir / "ingest_throughput.png",
        series,
        title="memtoc bench ingest: throughput against N",
        ylabel="events per second",
    )


def process_chart(results: Sequence[Mapping[str, object]], out_dir: Path) -> Path:
    """Events/s against N for the pipeline and the plain scan → ``process_throughput.png``."""
    series: dict[str, list[tuple[float, float]]] = {"pipeline": [], "scan baseline": []}
    for r in results:
        n = _num(r["events"])
        series["pipeline"].append((n, _num(r["events_per_s"])))
        series["scan baseline"].append((n, _num(r["scan_events_per_s"])))
    return line_chart(
        out_dir / "process_throughput.png",
        series,
        title="memtoc bench process: throughput against N",
        ylabel="events per second",
        log_y=True,
    )
