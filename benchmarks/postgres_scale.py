"""The figures behind ``docs/scale.md``: what the store's tables take per session, and what a wake-up costs as the
number of listening hosts grows - PostgreSQL LISTEN/NOTIFY against core NATS (``nats-server`` on 127.0.0.1:4222)
in the same run.

    python -m benchmarks.postgres_scale [--url postgresql://...] [--schema NAME] [--listeners 1,10,50]
        [--nats 127.0.0.1:4222] [--json out.json]

``--schema``: an existing store (filled, with its read model) whose tables are measured; without it, no sizes.
Fan-out: ``N`` listening connections (one per host, as each ``serve`` holds one) in one thread that reads them
all; a sender commits ``NOTIFY`` 200 times (one at a time, 5 ms apart); measured are the sender's commit time
and the delay from commit to each listener's wake-up (p50, p99 over every listener and message). The same for
NATS: ``N`` subscriber connections, one publisher, a PING round trip after each publish as its "commit". Needs
PostgreSQL (skips without it); the NATS rows are left out when nothing answers there.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from typing import Any

from benchmarks.args import bench_parser, postgres_or_skip
from benchmarks.figures import latency

MESSAGES = 200


def table_sizes(server: str, schema: str) -> dict[str, Any]:
    """Heap and index bytes of each table of the store, and the sessions and events they hold."""
    import psycopg  # noqa: PLC0415

    with psycopg.connect(server, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT c.relname, pg_table_size(c.oid), pg_indexes_size(c.oid) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
            (schema,),
        ).fetchall()
        sessions = conn.execute(f'SELECT count(*) FROM "{schema}".streams').fetchone()
        events = conn.execute(f'SELECT count(*) FROM "{schema}".events').fetchone()
    return {
        "sessions": sessions[0] if sessions else 0,
        "events": events[0] if events else 0,
        "tables": {name: {"table_bytes": heap, "index_bytes": index} for name, heap, index in rows},
    }


def _await_deliveries(delays: list[float], expected: int, done: threading.Event, thread: threading.Thread) -> None:
    """Give the listeners up to 10 s to receive every message, then stop the thread that reads for them."""
    deadline = time.monotonic() + 10
    while len(delays) < expected and time.monotonic() < deadline:
        time.sleep(0.01)
    done.set()
    thread.join()


def _fanout_figures(listeners: int, commits: list[float], delays: list[float]) -> dict[str, Any]:
    """A fan-out run's figures (NOTIFY or NATS alike): commit/publish and delivery latencies, deliveries made."""
    commit, delivery = latency(commits), latency(delays)
    return {
        "listeners": listeners,
        "commit_p50_us": commit.p50_us,
        "commit_p99_us": commit.p99_us,
        "delivery_p50_us": delivery.p50_us,
        "delivery_p99_us": delivery.p99_us,
        "delivered": len(delays),
    }


def notify_fanout(server: str, listeners: int) -> dict[str, Any]:
    import psycopg  # noqa: PLC0415

    channel = "acp_registry_fanout_bench"
    conns = [psycopg.connect(server, autocommit=True) for _ in range(listeners)]
    for conn in conns:
        conn.execute(f"LISTEN {channel}")
    delays: list[float] = []
    sent: dict[str, float] = {}
    done = threading.Event()

    def listen() -> None:
        by_fd = {conn.pgconn.socket: conn for conn in conns}
        while not done.is_set():
            ready, _, _ = select.select(list(by_fd), [], [], 0.1)
            now = time.perf_counter()
            for fd in ready:
                pgconn = by_fd[fd].pgconn
                pgconn.consume_input()
                while (note := pgconn.notifies()) is not None:
                    delays.append(now - sent[note.extra.decode()])

    thread = threading.Thread(target=listen)
    thread.start()
    commits: list[float] = []
    with psycopg.connect(server, autocommit=True) as sender:
        for n in range(MESSAGES):
            start = time.perf_counter()
            sent[str(n)] = start
            with sender.transaction():
                sender.execute(f"NOTIFY {channel}, '{n}'")
            commits.append(time.perf_counter() - start)
            time.sleep(0.005)
    _await_deliveries(delays, MESSAGES * listeners, done, thread)
    for conn in conns:
        conn.close()
    return _fanout_figures(listeners, commits, delays)


def _nats_connect(address: tuple[str, int]) -> socket.socket:
    sock = socket.create_connection(address, timeout=5)
    sock.recv(4096)  # INFO
    sock.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n')
    _read_until(sock, b"PONG\r\n")
    return sock


def _read_until(sock: socket.socket, marker: bytes) -> bytes:
    data = b""
    while marker not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("nats closed the connection")
        data += chunk
    return data


def nats_fanout(address: tuple[str, int], listeners: int) -> dict[str, Any]:
    subject = b"acp_registry.fanout.bench"
    subs = [_nats_connect(address) for _ in range(listeners)]
    for sock in subs:
        sock.sendall(b"SUB " + subject + b" 1\r\nPING\r\n")
        _read_until(sock, b"PONG\r\n")
        sock.setblocking(False)
    delays: list[float] = []
    sent: dict[bytes, float] = {}
    done = threading.Event()

    def listen() -> None:
        buffers = {sock.fileno(): b"" for sock in subs}
        by_fd = {sock.fileno(): sock for sock in subs}
        while not done.is_set():
            ready, _, _ = select.select(list(by_fd), [], [], 0.1)
            now = time.perf_counter()
            for fd in ready:
                buffers[fd] += by_fd[fd].recv(65536)
                while b"\r\n" in buffers[fd]:
                    line, rest = buffers[fd].split(b"\r\n", 1)
                    if line.startswith(b"MSG "):
                        if b"\r\n" not in rest:
                            break
                        payload, rest = rest.split(b"\r\n", 1)
                        delays.append(now - sent[payload])
                    elif line == b"PING":
                        by_fd[fd].sendall(b"PONG\r\n")
                    buffers[fd] = rest

    thread = threading.Thread(target=listen)
    thread.start()
    commits: list[float] = []
    publisher = _nats_connect(address)
    for n in range(MESSAGES):
        payload = str(n).encode()
        start = time.perf_counter()
        sent[payload] = start
        publisher.sendall(b"PUB " + subject + b" %d\r\n" % len(payload) + payload + b"\r\nPING\r\n")
        _read_until(publisher, b"PONG\r\n")  # the server has taken it: the "commit"
        commits.append(time.perf_counter() - start)
        time.sleep(0.005)
    _await_deliveries(delays, MESSAGES * listeners, done, thread)
    for sock in [*subs, publisher]:
        sock.close()
    return _fanout_figures(listeners, commits, delays)


def main() -> None:
    parser = bench_parser(__doc__, postgres=True)
    parser.add_argument("--schema", help="an existing store whose tables to measure")
    parser.add_argument("--listeners", default="1,10,50", help="listening connections, e.g. 1,10,50")
    parser.add_argument("--nats", default="127.0.0.1:4222", help="a nats-server (host:port)")
    args = parser.parse_args()
    server = postgres_or_skip(args.url)
    if server is None:
        return
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    if args.schema:
        results["sizes"] = table_sizes(server, args.schema)
    counts = [int(n) for n in args.listeners.split(",")]
    results["notify"] = [notify_fanout(server, n) for n in counts]
    host, _, port = args.nats.partition(":")
    try:
        results["nats"] = [nats_fanout((host, int(port or 4222)), n) for n in counts]
    except OSError as exc:
        print(f"NATS left out: nothing answers at {args.nats} ({exc})")
    text = json.dumps(results, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text)


if __name__ == "__main__":
    main()
