"""What real processes did, in order: strace attached to running processes, its output read
back as calls with the file each one touched, on one clock across processes.

The durability tests use it to see a database's WAL synced to disk between a request's
arrival and its answer (tests/e2e/test_durability.py). strace needs ptrace rights over the
processes: root has them here, and `make test` installs strace where it is missing.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

STRACE = shutil.which("strace") or "/usr/bin/strace"
#: The calls a request's path through a server and its database shows: socket reads and
#: writes (the request, the answer), file writes and syncs (the WAL).
TRACED = (
    "read,recvfrom,write,writev,sendto,sendmsg,pwrite64,pwritev,pwritev2,fsync,fdatasync,"
    "sync_file_range"
)
SYNCS = frozenset({"fsync", "fdatasync"})
WRITES = frozenset({"write", "writev", "pwrite64", "pwritev", "pwritev2"})
SOCKET_READS = frozenset({"read", "recvfrom"})
SOCKET_WRITES = frozenset({"write", "writev", "sendto", "sendmsg"})
NO_PTRACE = (
    "strace may not attach to the server's processes: run the tests as root, or let processes "
    "trace others of their user (`sysctl kernel.yama.ptrace_scope=0`)\n"
)
#: Seconds strace has to attach to every thread of every process: bounded, generous.
ATTACH_S = 60.0

# `PID SECONDS.MICROS name(FD<what>, ...) = RESULT <DURATION>`, or the call cut in two by
# another thread's: `... name(FD<what>, ... <unfinished ...>` then `... <... name resumed>...`.
_CALL = re.compile(r"^(\d+)\s+(\d+\.\d+)\s+(\w+)\((.*)$")
_RESUMED = re.compile(r"^(\d+)\s+(\d+\.\d+)\s+<\.\.\. (\w+) resumed>(.*)$")
#: A descriptor and what it is: `7</var/cleanair.db-wal>`, `9<TCP:[127.0.0.1:80->...]>` (whose
#: `->` holds a `>`: the annotation ends at the `>` the argument list goes on after).
_FD = re.compile(r"^\d+<(.+?)>(?=[,)\s])")
_END = re.compile(r"= (-?\d+)(?: [A-Z]+ \(.*\))? <(\d+\.\d+)>\s*$")


@dataclass(frozen=True)
class Call:
    """One system call: who made it, when it started and returned (seconds since the epoch),
    what its first argument's descriptor was (a path, `TCP:[local->peer]`), its text."""

    pid: int
    name: str
    start: float
    end: float
    target: str
    text: str
    result: int


def parse(lines: Sequence[str]) -> list[Call]:
    """The finished calls in strace's `-f -ttt -T -yy` output, in order of their start."""
    calls: list[Call] = []
    pending: dict[tuple[int, str], tuple[float, str]] = {}
    for line in lines:
        if match := _RESUMED.match(line):
            pid, name = int(match[1]), match[3]
            begun = pending.pop((pid, name), None)
            if begun is None:
                continue  # started before strace attached
            start, text = begun[0], begun[1] + match[4]
        elif match := _CALL.match(line):
            pid, start, name, text = int(match[1]), float(match[2]), match[3], match[4]
            if text.endswith("<unfinished ...>"):
                pending[(pid, name)] = (start, text.removesuffix("<unfinished ...>"))
                continue
        else:
            continue  # signals, exits
        ended = _END.search(text)
        if ended is None:
            continue  # interrupted by the detach
        fd = _FD.match(text)
        calls.append(
            Call(
                pid,
                name,
                start,
                start + float(ended[2]),
                fd[1] if fd else "",
                text,
                int(ended[1]),
            )
        )
    return sorted(calls, key=lambda call: call.start)


@dataclass(frozen=True)
class Exchange:
    """One request's time in a server: from the moment its bytes were read off the socket to
    the moment the server began writing its answer."""

    arrived: float
    answered: float


def exchange(calls: Sequence[Call], client_port: int) -> Exchange:
    """The exchange of the one connection the client made from `client_port`."""
    peer = f"->127.0.0.1:{client_port}]"
    on_socket = [c for c in calls if c.target.endswith(peer) and c.target.startswith("TCP:")]
    reads = [c for c in on_socket if c.name in SOCKET_READS and c.result > 0]
    answers = [c for c in on_socket if c.name in SOCKET_WRITES and "HTTP/1.1 " in c.text]
    assert reads, f"no read of the request from port {client_port} was traced"
    # Said in full when it fails (seen once on a loaded CI machine): what the port's socket
    # did, and every answer traced with the descriptor strace named it by.
    assert answers, (
        f"no answer to port {client_port} was traced; on its socket: "
        f"{[(c.pid, c.name, c.result) for c in on_socket]}; answers traced: "
        f"{[(c.pid, c.name, c.target) for c in calls if 'HTTP/1.1 ' in c.text]}"
    )
    return Exchange(arrived=reads[0].end, answered=answers[0].start)


def synced_before_answer(
    calls: Sequence[Call], during: Exchange, is_wal: Callable[[str], bool]
) -> tuple[bool, bool]:
    """Whether the request wrote the WAL (a file `is_wal` accepts) while it was handled, and
    whether every such write was synced to disk before the answer began: a sync of the WAL
    that started after the last of them and returned before the answer."""
    inside = [c for c in calls if during.arrived < c.start and c.end < during.answered]
    writes = [c for c in inside if c.name in WRITES and is_wal(c.target)]
    if not writes:
        return False, False
    last_write = max(c.end for c in writes)
    synced = any(c.name in SYNCS and is_wal(c.target) and c.start >= last_write for c in inside)
    return True, synced


@contextmanager
def traced(pids: Sequence[int], output: Path) -> Iterator[Callable[[], list[Call]]]:
    """strace attached to every thread of `pids` (and whatever they start) for the block;
    yields a function that detaches it and returns the calls it saw."""
    command = [STRACE, "-f", "-ttt", "-T", "-yy", "-s", "64", "-e", f"trace={TRACED}"]
    command += ["-o", str(output)]
    for pid in pids:
        command += ["-p", str(pid)]
    log = output.with_suffix(".log")
    with log.open("w") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr)
    done: list[Call] | None = None

    def finish() -> list[Call]:
        nonlocal done
        if done is None:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)  # strace detaches and flushes
                process.wait(timeout=60)
            done = parse(output.read_text().splitlines())
        return done

    try:
        deadline = time.monotonic() + ATTACH_S
        while not all(f"Process {pid} attached" in log.read_text() for pid in pids):
            assert "Operation not permitted" not in log.read_text(), NO_PTRACE + log.read_text()
            assert process.poll() is None, f"strace ended: {log.read_text()}"
            assert time.monotonic() < deadline, f"strace did not attach: {log.read_text()}"
            time.sleep(0.05)
        yield finish
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
