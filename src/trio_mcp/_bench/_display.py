"""What a person sees: the live progress line and the final tables (rich)."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ._options import IDLE, BenchConfig


class Progress:
    """A live line: elapsed time, requests done, current rate, errors.

    Does nothing when disabled (``--quiet``, or the console is not a terminal).
    """

    def __init__(self, console: Console, config: BenchConfig, *, enabled: bool) -> None:
        self.console = console
        self.config = config
        self.enabled = enabled
        self.live: Live | None = None
        self.started = 0.0
        self.last: tuple[float, int] = (0.0, 0)
        self.rate = 0.0

    def start(self, phase: str) -> None:
        if self.enabled:
            self.live = Live(
                Text(phase), console=self.console, refresh_per_second=4, transient=True
            )
            self.live.start()
        self.started = time.monotonic()
        self.last = (self.started, 0)

    def phase(self, text: str) -> None:
        if self.live is not None:
            self.live.update(Text(text))

    def update(self, done: int, errors: int) -> None:
        now = time.monotonic()
        then, before = self.last
        if now - then >= 0.5:
            self.rate = (done - before) / (now - then)
            self.last = (now, done)
        if self.live is None:
            return
        elapsed = now - self.started
        bound = (
            f"{elapsed:5.1f}/{self.config.warmup_s + self.config.duration_s:g} s"
            if self.config.duration_s is not None
            else f"{elapsed:5.1f} s, {done:,}/{self.config.requests:,}"
        )
        noun = "sessions opened" if self.config.scenario in IDLE else "requests"
        self.live.update(
            Text.assemble(
                (f"{bound}  ", "bold"),
                f"{noun} {done:,}  ",
                f"rate {self.rate:,.0f}/s  ",
                (f"errors {errors:,}", "red" if errors else ""),
            )
        )

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


def _ms(value: object) -> str:
    return "-" if value is None else f"{value:,.3f}"


def print_report(console: Console, report: dict[str, Any]) -> None:
    config = report["config"]
    totals = report["totals"]
    latency = report["latency_ms"]
    idle = report.get("idle")
    mode = f"open loop {config['rate']:g} req/s" if config["rate"] else "closed loop"
    console.print(
        f"[bold]trio-mcp bench[/bold] {config['url']}  scenario {config['scenario']}, "
        f"protocol {config['protocol']}, {config['connections']} connections, "
        f"{config['workers']} worker(s), {mode}"
    )
    table = Table(show_header=False, box=None, padding=(0, 2))
    if idle is not None:
        table.add_row("sessions opened", f"{idle['opened']:,} of {idle['requested']:,}")
        table.add_row("failed", f"{idle['failed']:,}")
        opened_in = idle["open_time_s"]
        table.add_row("opening took", "-" if opened_in is None else f"{opened_in:.3f} s")
        table.add_row("dropped while held", f"{idle['dropped_while_held']:,}")
        table.add_row("held at the end", f"{idle['held_at_end']:,}")
        label = "open latency ms"
    else:
        table.add_row("requests", f"{totals['requests']:,} ({totals['ok']:,} ok)")
        table.add_row("duration", f"{totals['duration_s']:.2f} s")
        rate = totals["requests_per_s"]
        table.add_row("req/s (ok)", "-" if rate is None else f"{rate:,.1f}")
        if config["scenario"] == "sse":
            table.add_row("progress events", f"{totals['progress_events']:,}")
        label = "latency ms"
    table.add_row(
        label,
        "  ".join(
            f"{name} {_ms(latency[key])}"
            for name, key in (
                ("p50", "p50"),
                ("p90", "p90"),
                ("p99", "p99"),
                ("p99.9", "p99.9"),
                ("max", "max"),
            )
        ),
    )
    table.add_row("errors", f"{totals['errors']:,}")
    console.print(table)
    if report["errors"]:
        errors = Table(title="errors by kind", title_justify="left")
        errors.add_column("kind")
        errors.add_column("count", justify="right")
        for kind, count in report["errors"].items():
            errors.add_row(kind, f"{count:,}")
        console.print(errors)
    if totals["interrupted"]:
        console.print("[yellow]interrupted: the numbers cover the run up to the stop[/yellow]")
