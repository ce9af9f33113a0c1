"""The served benchmarks' other client: `wrk` (C, one thread, epoll), which spends a small
part of the CPU the Python client does on the same requests, and where the CPU goes.

On a 2-core machine the client, the API processes and PostgreSQL's backends share the
cores: a Python client near one core's worth leaves a second API process no core of its
own. `wrk_round` drives the same keep-alive connections with far less, so a comparison of
1 and 2 API processes shows what the server side does with the cores left. `cpu_of` and
`Shares` say how a round's CPU divides between the client, the API processes and
PostgreSQL's processes; `connections_by_process` how a round's keep-alive connections
divide between the API processes. Installed by `make bench` when missing (Debian's wrk).
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
import tempfile
from pathlib import Path

#: Seconds a wrk round runs (the Python client sends a count of requests instead).
WRK_SECONDS = 4
WRK_HOW = "the wrk client needs wrk: run 'sudo apt-get install -y wrk' (Debian, Ubuntu)"
_UNITS = {"us": 1.0, "ms": 1e3, "s": 1e6}


def wrk_available() -> bool:
    return shutil.which("wrk") is not None


def _lua_string(text: str) -> str:
    # A long bracket whose level no part of the text closes: any text verbatim.
    level = 0
    while f"]{'=' * level}]" in text:
        level += 1
    return f"[{'=' * level}[{text}]{'=' * level}]"


def lua_script(method: str, headers: dict[str, str], body: bytes) -> str:
    """A wrk script sending every request with `method`, `headers` and `body`."""
    lines = [f"wrk.method = {_lua_string(method)}"]
    if body:
        lines.append(f"wrk.body = {_lua_string(body.decode())}")
    lines += [f"wrk.headers[ {_lua_string(k)} ] = {_lua_string(v)}" for k, v in headers.items()]
    return "\n".join(lines) + "\n"


def _microseconds(figure: str) -> float:
    found = re.fullmatch(r"([\d.]+)(us|ms|s)", figure)
    if found is None:
        raise SystemExit(f"wrk: unreadable latency {figure!r}")
    return float(found[1]) * _UNITS[found[2]]


def wrk_round(
    url: str,
    script: str,
    connections: int,
    seconds: float = WRK_SECONDS,
) -> tuple[list[float], int, float]:
    """Requests a second, p50 µs and p99 µs of `seconds` of wrk on `url` with `connections`
    keep-alive connections from one thread; the requests answered; the CPU seconds wrk
    used."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua") as file:
        file.write(script)
        file.flush()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(
            ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", file.name, url],
            capture_output=True,
            text=True,
            check=False,
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"wrk failed: {done.stderr.strip()}")
    if "Non-2xx" in done.stdout or "Socket errors" in done.stdout:
        raise SystemExit(f"wrk: requests failed:\n{done.stdout}")
    rate = re.search(r"Requests/sec:\s+([\d.]+)", done.stdout)
    p50 = re.search(r"\s50%\s+(\S+)", done.stdout)
    p99 = re.search(r"\s99%\s+(\S+)", done.stdout)
    count = re.search(r"(\d+) requests in", done.stdout)
    if rate is None or p50 is None or p99 is None or count is None:
        raise SystemExit(f"wrk: unreadable output:\n{done.stdout}")
    spent = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    stats = [float(rate[1]), _microseconds(p50[1]), _microseconds(p99[1])]
    return stats, int(count[1]), spent


def children(pid: int) -> list[int]:
    """`pid`'s child processes (Linux's /proc)."""
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []


def cpu_of(pids: list[int]) -> float:
    """User and system CPU seconds `pids` have used so far (those that have ended: none)."""
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime (proc(5))
    return ticks / os.sysconf("SC_CLK_TCK")


def postgres_processes(data: Path) -> list[int]:
    """A PostgreSQL server's processes: its postmaster (the first line of postmaster.pid)
    and its children, the backends and the server's own workers."""
    postmaster = int((data / "postmaster.pid").read_text().split()[0])
    return [postmaster, *children(postmaster)]


#: CPU seconds over a round by who spent them: the client, the API processes, PostgreSQL's
#: processes; and the round's wall seconds.
Shares = dict[str, float]


def shares_line(shares: Shares, cores: int | None = None) -> str:
    """`shares` as each one's part of the machine's cores over the round's wall time; what
    is left was idle or went to other processes on the machine."""
    cores = cores or os.cpu_count() or 1
    wall = shares["wall"] * cores
    parts = {name: seconds / wall for name, seconds in shares.items() if name != "wall"}
    rest = 1 - sum(parts.values())
    return ", ".join(f"{name} {part:.0%}" for name, part in parts.items()) + f", rest {rest:.0%}"


def connections_by_process(port: int, pids: list[int]) -> list[int]:
    """How many established connections to `port` each of `pids` holds (their server ends:
    sockets whose local port is `port`, from /proc/net/tcp and the processes' descriptors)."""
    established = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                established.add(f"socket:[{fields[9]}]")
    counts = []
    for pid in pids:
        held = 0
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                held += os.readlink(f"/proc/{pid}/fd/{fd}") in established
            except OSError:  # closed meanwhile
                continue
        counts.append(held)
    return counts


def split_line(splits: list[list[int]]) -> str:
    """Each round's connections by API process, most first: `8-0, 5-3`."""
    return ", ".join("-".join(map(str, sorted(split, reverse=True))) for split in splits)
