"""Memory of served processes on generated cities, networks mapped from shared files (issue 34).

A generated street grid (`planning.city_grid`: 1,000 x 1,000 nodes, a million, by default;
`--nodes 5000000` for the metropolis of about 2,236 x 2,236) is stored in a SQLite database
and served by real `cleanair serve` processes with the shipped defaults, in three layouts
one after another:

- `CLEANAIR_NETWORK_FILES=off`, one API process: every process loads its own copy from the
  database (the layout before issue 34, the baseline of the run);
- the default: the network mapped from the machine's network file (written by the first
  process that needs it), one API process and its plan process;
- the same with `--workers 2`: two API processes, each with its plan process.

In each, once the API answers, `PLANS` walks of 2-5 km are planned one after another (each
submitted once the last finished, so each one's `finished_at - created_at` is its own time),
then every process of the layout is read from /proc/PID/smaps_rollup: its resident set (RSS,
which counts the file's pages in every process mapping them), its proportional share (PSS,
each shared page split between the processes holding it), its private and shared pages (a
file's page is private to the one process that has it mapped) and its anonymous memory (its
own, not a file's: heap and the arrays it made).

Aims (issue 34), on the million-node city: RSS of `serve` and its plan process together under
1 GB after the plans, each further API or plan process under 150 MB more; on the 5M-node city,
plan p50 under 2 s and everything under 3 GB. Run alone: `PYTHONPATH=. .venv/bin/python -m
bench.shared_networks [--nodes N]`.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import math
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import attrs
import httpx

from bench.loaded import CLI, free_port, prepared, start, walks
from bench.planning import city_grid

PLANS = 7
DEADLINE_S = 900.0
MIB = 1024 * 1024
OFF = "own copies (CLEANAIR_NETWORK_FILES=off)"
SHARED = "shared files (default)"
WORKERS = "shared files, --workers 2"
FIELDS = (
    "Rss",
    "Pss",
    "Shared_Clean",
    "Shared_Dirty",
    "Private_Clean",
    "Private_Dirty",
    "Anonymous",
)


@attrs.frozen
class Memory:
    """One process's memory (bytes), from /proc/PID/smaps_rollup."""

    role: str
    rss: int
    pss: int
    shared: int
    private: int  # pages no other process maps (a file's pages too, when only it has them)
    anonymous: int  # the process's own memory (heap, arrays it made), not a file's pages


def memory_of(pid: int, role: str) -> Memory:
    kib = dict.fromkeys(FIELDS, 0)
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, value, *_ = line.split()
        if name.rstrip(":") in kib:
            kib[name.rstrip(":")] = int(value)
    return Memory(
        role,
        kib["Rss"] * 1024,
        kib["Pss"] * 1024,
        (kib["Shared_Clean"] + kib["Shared_Dirty"]) * 1024,
        (kib["Private_Clean"] + kib["Private_Dirty"]) * 1024,
        kib["Anonymous"] * 1024,
    )


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (from /proc)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, of in parents.items() if of == parent]
        found += children
        frontier += children
    return sorted(found)


def role_of(pid: int, serve: int, workers: bool) -> str:
    command = Path(f"/proc/{pid}/cmdline").read_bytes()
    if b"plan_processes" in command:
        return "plan process"
    if pid == serve:
        return "supervisor (serve)" if workers else "API process (serve)"
    return "API process"


def plan_seconds(database: str, since: int) -> list[float]:
    with contextlib.closing(sqlite3.connect(database, timeout=30)) as conn:
        rows = conn.execute(
            "SELECT finished_at - created_at FROM plans WHERE status <> 'pending' "
            "ORDER BY created_at LIMIT -1 OFFSET ?",
            (since,),
        ).fetchall()
    return [float(seconds) for (seconds,) in rows]


def finished(database: str) -> int:
    with contextlib.closing(sqlite3.connect(database, timeout=30)) as conn:
        return int(
            conn.execute("SELECT count(*) FROM plans WHERE status <> 'pending'").fetchone()[0]
        )


def finished_at_least(database: str, count: int) -> bool:
    return finished(database) >= count


def wait_until(check: Callable[[], bool], what: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        assert process.poll() is None, f"serve exited while waiting for {what}"
        assert time.monotonic() < deadline, f"no {what} in {DEADLINE_S:.0f} s"
        time.sleep(0.05)


def one_layout(
    name: str, env: Mapping[str, str], token: str, plans: list[dict[str, object]], log: Path
) -> tuple[float, list[float], list[Memory]]:
    """Serve in layout `name`, plan `PLANS` walks: seconds to the first answer, each plan's
    seconds, and every process's memory after the plans."""
    port = free_port()
    extra = {"CLEANAIR_NETWORK_FILES": "off"} if name == OFF else {}
    argv = [str(CLI), "serve", "--port", str(port)]
    if name == WORKERS:
        argv += ["--workers", "2"]
    started = time.perf_counter()
    serve = start({**env, **extra}, argv, log)
    database = env["CLEANAIR_DATABASE"]
    try:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60) as c:

            def answering() -> bool:
                try:
                    return c.get("/livez").status_code == 200
                except httpx.TransportError:
                    return False

            wait_until(answering, "answer", serve)
            ready = time.perf_counter() - started
            before = finished(database)
            for number in range(1, PLANS + 1):
                assert c.post("/v1/routes", json=plans.pop()).status_code == 202
                wait_until(
                    functools.partial(finished_at_least, database, before + number), "plan", serve
                )
        seconds = plan_seconds(database, before)
        workers = name == WORKERS
        memory = [memory_of(serve.pid, role_of(serve.pid, serve.pid, workers))] + [
            memory_of(pid, role_of(pid, serve.pid, workers)) for pid in descendants(serve.pid)
        ]
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=DEADLINE_S)
    return ready, seconds, memory


def mib(n: float) -> str:
    return f"{n / MIB:,.0f} MiB"


def layout_lines(name: str, ready: float, seconds: list[float], memory: list[Memory]) -> list[str]:
    rss, pss = sum(m.rss for m in memory), sum(m.pss for m in memory)
    lines = [
        f"  {name}: first answer after {ready:.1f} s; plan p50 "
        f"{statistics.median(seconds):.2f} s (max {max(seconds):.2f} s, {len(seconds)} plans)",
    ]
    for m in memory:
        lines.append(
            f"    {m.role:<20} RSS {mib(m.rss):>10}  PSS {mib(m.pss):>10}  "
            f"private {mib(m.private):>10}  shared {mib(m.shared):>10}  "
            f"anonymous {mib(m.anonymous):>10}"
        )
    lines.append(f"    {'all processes':<20} RSS {mib(rss):>10}  PSS {mib(pss):>10}")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.shared_networks")
    parser.add_argument("--nodes", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    size = math.isqrt(args.nodes)
    started = time.perf_counter()
    network = city_grid(size, seed=13)
    plans = walks(network, PLANS * 3, seed=5)
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        env, token = prepared(Path(tmp), network)
        stored = time.perf_counter() - started
        print(
            f"memory of served processes on a {network.node_count:,}-node, "
            f"{network.edge_count:,}-edge generated grid (generated and stored in {stored:.0f} s; "
            f"load average {load[0]:.2f} at the start; {PLANS} walks of 2-5 km in each layout):"
        )
        layouts = (SHARED, WORKERS) if args.nodes > 2_000_000 else (OFF, SHARED, WORKERS)
        totals: dict[str, tuple[int, int, list[float], int]] = {}
        for name in layouts:
            ready, seconds, memory = one_layout(name, env, token, plans, Path(tmp) / "serve.log")
            for line in layout_lines(name, ready, seconds, memory):
                print(line)
            totals[name] = (
                sum(m.rss for m in memory),
                sum(m.pss for m in memory),
                seconds,
                len(memory),
            )
        files = list(Path(tmp).glob("cleanair.db.networks/*.network"))
        print(f"  network file: {mib(sum(f.stat().st_size for f in files))}")
    rss, pss, seconds, count = totals[SHARED]
    more = totals[WORKERS][3] - count  # the supervisor, an API process and a plan process
    more_rss = (totals[WORKERS][0] - rss) / more
    more_pss = (totals[WORKERS][1] - pss) / more
    if OFF in totals:
        print(
            f"  shared against own copies: RSS {rss / totals[OFF][0]:.2f}x, "
            f"PSS {pss / totals[OFF][1]:.2f}x"
        )
    if args.nodes <= 2_000_000:
        print(
            f"  aim: serve with its plan process under 1 GB: RSS {mib(rss)}, PSS {mib(pss)} "
            f"({'met' if rss < 1024 * MIB else 'NOT met'} on RSS, "
            f"{'met' if pss < 1024 * MIB else 'NOT met'} on PSS)"
        )
        print(
            f"  aim: each further process under 150 MB (--workers 2 adds {more}: the supervisor, "
            f"an API and a plan process): RSS +{mib(more_rss)}, PSS +{mib(more_pss)} each"
        )
    else:
        p50 = statistics.median(seconds)
        print(
            f"  aim: plan p50 under 2 s: {p50:.2f} s ({'met' if p50 < 2 else 'NOT met'}); "
            f"everything under 3 GB: RSS {mib(rss)}, PSS {mib(pss)} "
            f"({'met' if rss < 3072 * MIB else 'NOT met'} on RSS, "
            f"{'met' if pss < 3072 * MIB else 'NOT met'} on PSS)"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
