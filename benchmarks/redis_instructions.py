"""redis-server's instructions per SSE answer of the Redis event store.

    PYTHONPATH=src python benchmarks/redis_instructions.py [--answers 4000]
        [--warmup 6000] [--at-once 64] [--sessions 2] [--session-bytes N] [--no-ids]
        [--keep-dump PATH]

Starts redis-server under ``valgrind --tool=callgrind`` (no persistence) and
drives a `RedisEventStore` in this process the way ``redis_suite.py``'s
``progress-sse`` scenario does: `--at-once` answers at a time over
`--sessions` sessions, each one POST stream opened with a request id, five
events (the priming event, 3 progress notifications, the answer) and its
end. The warm-up fills the sessions past their byte bound, so that the
measured answers pay for shedding old streams as they do under wrk. Then
the counters are zeroed (``callgrind_control -z``), `--answers` more are
driven and the counters dumped: the instructions redis-server ran (its
command handling, the scripts' Lua, the socket reads and writes in user
space), divided by the answers. The count barely moves from run to run, so
it shows a change to the scripts that redis-server's share of a loaded
core's CPU would hide.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from instructions import free_port, total_instructions

from trio_mcp import MCPConfig
from trio_mcp._stores._redis import RedisLink
from trio_mcp._stores._redis_events import RedisEventStore

PROGRESS = (
    b'{"jsonrpc":"2.0","method":"notifications/progress","params":'
    b'{"progressToken":"bench-%d","progress":%d,"total":3}}'
)
ANSWER = (
    b'{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text",'
    b'"text":"progress done"}],"isError":false}}'
)


async def answer(store: RedisEventStore, session_id: str, request_id: int, with_ids: bool) -> None:
    """One SSE answer's traffic to the event store."""
    ids = (lambda: [request_id]) if with_ids else None
    stream = await store.open_stream(session_id, ids)
    await store.append(session_id, stream, b"", 0.0)
    for step in (1, 2, 3):
        await store.append(session_id, stream, PROGRESS % (request_id, step), 0.0)
    await store.append(session_id, stream, ANSWER % request_id, 0.0)
    store.closed_stream(session_id, stream)


async def drive(store: RedisEventStore, args: argparse.Namespace, count: int) -> None:
    sessions = [f"bench-session-{n}" for n in range(args.sessions)]
    done = 0
    while done < count:
        async with trio.open_nursery() as nursery:
            for i in range(min(args.at_once, count - done)):
                session_id = sessions[i % len(sessions)]
                nursery.start_soon(answer, store, session_id, done + i, not args.no_ids)
        done += args.at_once
    await store.write()  # (the last ends)


async def measure(args: argparse.Namespace, port: int, pid: int) -> None:
    link = RedisLink(f"redis://127.0.0.1:{port}/0", "")
    config = MCPConfig(event_buffer_session_bytes=args.session_bytes)
    store = RedisEventStore(link, config, grace_s=60.0)
    async with link.opened():
        await drive(store, args, args.warmup)
        await trio.run_process(["callgrind_control", "-z", str(pid)], capture_stdout=True)
        await drive(store, args, args.answers)
        await trio.run_process(["callgrind_control", "-d", str(pid)], capture_stdout=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=4000)
    parser.add_argument("--warmup", type=int, default=6000)
    parser.add_argument("--at-once", type=int, default=64)
    parser.add_argument("--sessions", type=int, default=2)
    parser.add_argument(
        "--session-bytes", type=int, default=MCPConfig().event_buffer_session_bytes,
        help="event_buffer_session_bytes (a large one: no stream is shed)",
    )  # fmt: skip
    parser.add_argument(
        "--no-ids", action="store_true", help="open the streams without request ids"
    )
    parser.add_argument("--keep-dump", help="copy the callgrind dump here (for callgrind_annotate)")
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="trio-mcp-redis-callgrind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        server = subprocess.Popen(
            [
                "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                shutil.which("redis-server") or "redis-server", "--port", str(port),
                "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", tmp,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            while (
                subprocess.run(
                    ["redis-cli", "-p", str(port), "PING"], capture_output=True, text=True
                ).stdout.strip()
                != "PONG"
            ):
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("redis-server did not start under valgrind")
                time.sleep(0.5)
            trio.run(measure, args, port, server.pid)
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=120)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        dumps = sorted(Path(tmp).glob("callgrind.out.*"), key=lambda p: p.stat().st_mtime)
        if not dumps:
            raise SystemExit("callgrind wrote no dump")
        instructions = total_instructions(dumps[-1].read_text())
        if args.keep_dump:
            shutil.copyfile(dumps[-1], args.keep_dump)
    print(
        f"{instructions / args.answers:,.0f} redis-server instructions per SSE answer "
        f"({args.answers:,} answers, {args.at_once} at a time, {args.sessions} sessions)"
    )


if __name__ == "__main__":
    main()
