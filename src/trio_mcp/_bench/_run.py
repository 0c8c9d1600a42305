"""The parent process of a benchmark: start the workers, show progress, merge, report.

Workers are started with the ``spawn`` method (no fork of a process that may
hold threads or a trio run), prepare their connections and sessions, say they
are ready, and start together on the parent's "go" with one shared monotonic
start time, so their per-second series line up.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import signal
import sys
import time
from typing import Any

import orjson
from rich.console import Console

from .._errors import UsageError
from ._display import Progress, print_report
from ._merge import merge_results
from ._options import IDLE, BenchConfig
from ._plan import WorkerPlan, WorkerResult
from ._target import Target, resolve
from ._worker import (
    GIVE_UP_AFTER,
    Worker,
    leave,
    prepare_worker,
    raise_file_limit,
    run_worker,
    worker_main,
    worker_result,
)

FD_MARGIN = 32  # descriptors a worker needs besides its sockets
START_GRACE_S = 30.0  # for spawning the workers and setting up their sessions
END_GRACE_S = 15.0


def split(total: int, parts: int) -> list[int]:
    """`total` split into `parts` nearly equal whole numbers, larger ones first."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def make_plans(config: BenchConfig, target: Target) -> list[WorkerPlan]:
    workers = config.workers
    idle = config.scenario in IDLE
    connections = split(config.connections, workers) if not idle else [1] * workers
    if idle:
        connections = [max(1, n) for n in split(config.connections, workers)]
    counts = split(config.count, workers) if idle else [0] * workers
    shares: list[int | None] = (
        list(split(config.requests, workers)) if config.requests is not None else [None] * workers
    )
    plans = []
    first = 0
    for index in range(workers):
        plans.append(
            WorkerPlan(
                index=index,
                target=target,
                scenario=config.scenario,
                protocol=config.protocol,
                tool=config.tool,
                arguments=config.arguments,
                connections=connections[index],
                first_connection=first,
                total_connections=config.connections,
                rate=config.rate,
                requests=shares[index],
                count=counts[index],
                warmup_s=config.warmup_s,
                duration_s=config.duration_s,
                timeout_s=config.timeout_s,
            )
        )
        first += connections[index]
    return plans


def check_file_limit(plans: list[WorkerPlan]) -> None:
    _, hard = raise_file_limit()
    need = max(max(p.connections, p.count) for p in plans) + FD_MARGIN
    if need > hard:
        raise UsageError(
            f"a worker needs {need} file descriptors but the hard limit (ulimit -Hn) is {hard}; "
            "use more --workers or raise the limit"
        )


class InProcess:
    """The parent's side of a worker run in this process (``--workers 1``).

    Speaks the worker's half of the pipe protocol: progress goes straight to
    the display, and a stop (Ctrl-C) is seen at the worker's next tick.
    """

    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    def poll(self) -> bool:
        return self.runner.stop_requested

    def recv(self) -> tuple[str]:
        return ("stop",)

    def send(self, message: tuple[Any, ...]) -> None:
        if message[0] == "progress":
            self.runner.progress.update(message[2], message[3])


class Runner:
    def __init__(self, config: BenchConfig, plans: list[WorkerPlan], progress: Progress) -> None:
        self.config = config
        self.plans = plans
        self.progress = progress
        self.pipes: dict[int, Any] = {}
        self.processes: list[Any] = []
        self.done: dict[int, int] = {}
        self.errors: dict[int, int] = {}
        self.results: dict[int, WorkerResult] = {}
        self.failures: list[str] = []
        self.stop_requested = False
        self.stop_sent = False

    def start(self) -> None:
        context = multiprocessing.get_context("spawn")
        for plan in self.plans:
            parent_end, child_end = context.Pipe()
            process = context.Process(
                target=worker_main, args=(plan, child_end), name=f"bench-worker-{plan.index}"
            )
            process.daemon = True
            process.start()
            child_end.close()
            self.pipes[plan.index] = parent_end
            self.processes.append(process)

    def receive(self, timeout: float) -> list[tuple[int, Any]]:
        """Messages from the workers that arrive within `timeout`; lost workers noted."""
        by_pipe = {id(pipe): index for index, pipe in self.pipes.items()}
        ready: list[Any] = multiprocessing.connection.wait(list(self.pipes.values()), timeout)
        messages = []
        for pipe in ready:
            index = by_pipe[id(pipe)]
            try:
                message = pipe.recv()
            except (EOFError, OSError):
                self.failures.append(f"worker {index} exited without a result")
                del self.pipes[index]
                continue
            messages.append((index, message))
        return messages

    def handle(self, index: int, message: Any) -> None:
        kind = message[0]
        if kind == "progress":
            self.done[index], self.errors[index] = message[2], message[3]
        elif kind == "result":
            self.results[index] = message[1]
            self.pipes.pop(index, None)
        elif kind == "crash":
            self.failures.append(f"worker {index} failed: {message[1]}")
            self.pipes.pop(index, None)

    def send_all(self, message: tuple[Any, ...]) -> None:
        for pipe in list(self.pipes.values()):
            try:
                pipe.send(message)
            except OSError:
                pass

    def run_here(self) -> None:
        """One worker, run in this process: no second interpreter to start."""
        (plan,) = self.plans
        worker = Worker(plan, InProcess(self))
        try:
            self.progress.start(f"setting up {self.config.connections} connections")
            prepare_worker(worker, time.monotonic() + self.config.timeout_s + 1.0)
            if self.stop_requested:
                self.results[plan.index] = worker_result(worker, time.monotonic())
                return
            self.progress.start("starting")
            self.results[plan.index] = run_worker(worker, time.monotonic())
        finally:
            leave(worker)

    def run(self) -> None:
        if len(self.plans) == 1:
            self.run_here()
            return
        self.progress.start(f"setting up {self.config.connections} connections")
        ready: set[int] = set()
        deadline = time.monotonic() + self.config.timeout_s + START_GRACE_S
        while len(ready) < len(self.pipes) and time.monotonic() < deadline:
            if self.stop_requested:
                break
            for index, message in self.receive(0.25):
                if message[0] == "ready":
                    ready.add(index)
                else:
                    self.handle(index, message)
        if self.stop_requested or len(ready) < len(self.pipes):
            if len(ready) < len(self.pipes) and not self.stop_requested:
                self.failures.append("workers did not become ready in time")
            self.send_all(("stop",))
            self.collect(time.monotonic() + END_GRACE_S)
            return
        start = time.monotonic() + 0.05
        self.send_all(("go", start))
        self.progress.start("starting")
        if self.config.duration_s is not None:
            end = start + self.config.warmup_s + self.config.duration_s
            self.collect(end + self.config.timeout_s + END_GRACE_S)
        else:
            self.collect(float("inf"))

    def collect(self, deadline: float) -> None:
        while self.pipes:
            if self.stop_requested and not self.stop_sent:
                self.send_all(("stop",))
                self.stop_sent = True
            if time.monotonic() > deadline:
                self.failures.append("workers did not finish in time")
                break
            for index, message in self.receive(0.25):
                self.handle(index, message)
            self.progress.update(sum(self.done.values()), sum(self.errors.values()))

    def finish(self) -> None:
        for pipe in self.pipes.values():
            pipe.close()
        for process in self.processes:
            process.join(5)
            if process.is_alive():
                process.terminate()
                process.join(5)


def run(config: BenchConfig) -> int:
    """Run the benchmark `config` describes; the exit status."""
    to_stdout = config.json_path == "-"
    console = Console(stderr=to_stdout)
    if config.plot_path is not None:
        from ._plot import check_available

        check_available()
    target = resolve(config.url, allow_remote=config.allow_remote)
    plans = make_plans(config, target)
    check_file_limit(plans)
    progress = Progress(console, config, enabled=not config.quiet and console.is_terminal)
    runner = Runner(config, plans, progress)

    def on_sigint(signum: int, frame: object) -> None:
        runner.stop_requested = True

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        if len(plans) > 1:
            runner.start()
        runner.run()
    finally:
        progress.stop()
        signal.signal(signal.SIGINT, previous)
        runner.finish()
    results = [runner.results[i] for i in sorted(runner.results)]
    report = merge_results(config, results)
    for result in results:
        if result.gave_up:
            runner.failures.append(
                f"worker {result.index} gave up: every connection failed to connect "
                f"{GIVE_UP_AFTER} times in a row"
            )
    report["failures"] = runner.failures
    if runner.stop_requested:
        report["totals"]["interrupted"] = True
    print_report(console, report)
    errors_console = Console(stderr=True)
    for failure in runner.failures:
        errors_console.print(f"[red]trio-mcp bench: {failure}[/red]")
    if config.json_path is not None:
        data = orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n"
        if to_stdout:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
        else:
            with open(config.json_path, "wb") as file:
                file.write(data)
    if config.plot_path is not None:
        from ._plot import plot

        plot(report, config.plot_path)
    totals = report["totals"]
    if runner.failures or totals["errors"] or (not totals["ok"] and "idle" not in report):
        return 1
    if "idle" in report and report["idle"]["opened"] < config.count:
        return 1
    return 0
