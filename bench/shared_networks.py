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
then every process of the layout is read from /proc/PID/smaps, mapping by mapping: its resident
set (RSS, which counts the file's pages in every process mapping them), its proportional share
(PSS, each shared page split between the processes holding it) and its private pages (USS:
Private_Clean + Private_Dirty, what the machine gets back when the process ends), a plan
process's by kind of mapping (`KINDS`: the network file, the heap, other anonymous memory,
libraries, other files), with its CPU time and the page faults that read from disk (plans
slowed by reading the network file from disk show in both: a plan's wall time on a shared
machine is noisier than its CPU).

Aims (issue 34), on the million-node city: RSS of `serve` and its plan process together under
1 GB after the plans, each further API or plan process under 150 MB more (judged on USS, what
the machine's free memory loses when the process is added, PSS beside it: RSS counts again the
file pages other processes hold; of a plan process's USS, the pages of the network file only
it has read are page cache, dropped under pressure and shared once another process reads them,
so its own memory, heap and anonymous, is said apart); on the 5M-node city,
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
FIELDS = ("Rss", "Pss", "Private_Clean", "Private_Dirty")
#: What a mapping is, by its name in /proc/PID/smaps: the network file every process maps,
#: the C heap (malloc's main arena), the other anonymous memory (NumPy's large arrays, other
#: arenas, thread stacks), shared libraries, and every other file (the interpreter, SQLite's
#: shared-memory index).
KINDS = ("network file", "heap", "anonymous", "libraries", "other files")


@attrs.frozen
class Share:
    """What one kind of mapping holds of a process: resident, proportional and private."""

    rss: int = 0
    pss: int = 0
    uss: int = 0  # Private_Clean + Private_Dirty: what ending the process gives back

    def plus(self, other: Share) -> Share:
        return Share(self.rss + other.rss, self.pss + other.pss, self.uss + other.uss)


@attrs.frozen
class Memory:
    """One process's memory (bytes), from /proc/PID/smaps, by kind of mapping (`KINDS`)."""

    role: str
    kinds: dict[str, Share]
    cpu_s: float = 0.0  # user + system CPU time since the process started
    major_faults: int = 0  # page faults that read from disk

    @property
    def total(self) -> Share:
        return functools.reduce(Share.plus, self.kinds.values(), Share())

    @property
    def rss(self) -> int:
        return self.total.rss

    @property
    def pss(self) -> int:
        return self.total.pss

    @property
    def uss(self) -> int:
        return self.total.uss


def kind_of(name: str) -> str:
    """The kind (`KINDS`) of a mapping named `name` in /proc/PID/smaps."""
    name = name.removesuffix(" (deleted)")  # a file replaced since it was mapped
    if name.endswith(".network"):
        return "network file"
    if name == "[heap]":
        return "heap"
    if not name or name.startswith("["):  # [anon:...], [stack], [vvar], ...
        return "anonymous"
    return "libraries" if ".so" in Path(name).name else "other files"


def memory_of(pid: int, role: str) -> Memory:
    kib: dict[str, dict[str, int]] = {kind: dict.fromkeys(FIELDS, 0) for kind in KINDS}
    kind = "anonymous"
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head, _, rest = line.partition(" ")
        if "-" in head and not head.endswith(":"):  # a mapping: address perms offset dev inode name
            kind = kind_of(rest.split(maxsplit=4)[4] if len(rest.split()) > 4 else "")
        elif head.rstrip(":") in FIELDS:
            kib[kind][head.rstrip(":")] += int(rest.split()[0])
    # /proc/PID/stat after the command's closing parenthesis: state is field 3, majflt 12,
    # utime 14, stime 15 (proc(5)).
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return Memory(
        role,
        {
            kind: Share(
                f["Rss"] * 1024,
                f["Pss"] * 1024,
                (f["Private_Clean"] + f["Private_Dirty"]) * 1024,
            )
            for kind, f in kib.items()
        },
        cpu_s=(int(stat[11]) + int(stat[12])) / ticks,
        major_faults=int(stat[9]),
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
    rss, pss, uss = (
        sum(m.rss for m in memory),
        sum(m.pss for m in memory),
        sum(m.uss for m in memory),
    )
    lines = [
        f"  {name}: first answer after {ready:.1f} s; plan p50 "
        f"{statistics.median(seconds):.2f} s (max {max(seconds):.2f} s, {len(seconds)} plans)",
    ]
    for m in memory:
        lines.append(
            f"    {m.role:<20} RSS {mib(m.rss):>10}  PSS {mib(m.pss):>10}  USS {mib(m.uss):>10}"
        )
        if m.role == "plan process":
            lines.append(
                f"      CPU {m.cpu_s:.2f} s (user + system, since it started), "
                f"{m.major_faults:,} page faults read from disk"
            )
            lines += [
                f"      {kind:<18} RSS {mib(share.rss):>10}  PSS {mib(share.pss):>10}  "
                f"USS {mib(share.uss):>10}"
                for kind, share in m.kinds.items()
            ]
    lines.append(
        f"    {'all processes':<20} RSS {mib(rss):>10}  PSS {mib(pss):>10}  USS {mib(uss):>10}"
    )
    return lines


def added_lines(memory: list[Memory]) -> list[str]:
    """Per API and plan process of `--workers 2`, what it adds: its RSS (which counts every
    page of the network file it touched, though the machine holds them once), its PSS and its
    USS (its private pages: what the machine's free memory gains back when it ends)."""
    lines = []
    for role in ("API process", "plan process"):
        mine = [m for m in memory if m.role == role]
        if mine:
            worst = max(mine, key=lambda m: m.uss)
            own = worst.kinds["heap"].uss + worst.kinds["anonymous"].uss
            lines.append(
                f"  aim: each further {role} under 150 MB more, judged on USS (PSS beside it): "
                f"{len(mine)} of them, the largest RSS {mib(worst.rss)}, PSS {mib(worst.pss)}, "
                f"USS {mib(worst.uss)} ({'met' if worst.uss < 150e6 else 'NOT met'} on USS, "
                f"{'met' if worst.pss < 150e6 else 'NOT met'} on PSS, "
                f"{'met' if worst.rss < 150e6 else 'NOT met'} on RSS); of its USS, "
                f"{mib(own)} its own memory (heap and anonymous: "
                f"{'met' if own < 150e6 else 'NOT met'}), "
                f"{mib(worst.kinds['network file'].uss)} pages of the network file no other "
                "process has mapped (page cache the system can drop, shared once another "
                "process reads them)"
            )
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
        processes: dict[str, list[Memory]] = {}
        for name in layouts:
            ready, seconds, memory = one_layout(name, env, token, plans, Path(tmp) / "serve.log")
            for line in layout_lines(name, ready, seconds, memory):
                print(line)
            processes[name] = memory
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
        for line in added_lines(processes[WORKERS]):
            print(line)
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
