"""``--plot FILE.png``: latency percentiles and throughput per second (matplotlib)."""

from __future__ import annotations

from typing import Any

from .._errors import UsageError

INSTALL_PLOT = "pip install 'trio-mcp[plot]'"


def check_available() -> None:
    """Fail before the run, not after it, when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError(f"--plot needs matplotlib: {INSTALL_PLOT}") from None


def plot(report: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only; no display needed
    import matplotlib.pyplot as plt

    rows = report["series"]
    seconds = [row["second"] for row in rows]
    figure, (latency, throughput) = plt.subplots(2, 1, sharex=True, figsize=(9, 6))
    for key, label in (("p50_ms", "p50"), ("p90_ms", "p90"), ("p99_ms", "p99"), ("max_ms", "max")):
        values = [row[key] if row[key] is not None else float("nan") for row in rows]
        latency.plot(seconds, values, marker=".", label=label)
    latency.set_ylabel("latency (ms)")
    latency.set_yscale("log")
    latency.legend(loc="upper right")
    latency.grid(True, which="both", alpha=0.3)
    throughput.plot(seconds, [row["ok"] for row in rows], marker=".", label="ok/s")
    throughput.plot(seconds, [row["errors"] for row in rows], marker=".", label="errors/s")
    throughput.set_ylabel("per second")
    throughput.set_xlabel("second of the measured run")
    throughput.legend(loc="upper right")
    throughput.grid(True, alpha=0.3)
    config = report["config"]
    figure.suptitle(
        f"{config['url']}  {config['scenario']}, {config['protocol']}, "
        f"{config['connections']} connections"
        + (f", {config['rate']:g} req/s" if config["rate"] else "")
    )
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
