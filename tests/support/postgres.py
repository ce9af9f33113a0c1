"""A real PostgreSQL server for the tests, started and removed by the test session itself.

It uses the machine's PostgreSQL binaries (Debian's packages put them in
/usr/lib/postgresql/<version>/bin; elsewhere `pg_config --bindir` says where). `initdb` and
the server refuse to run as root, so as root every server command runs as the `postgres`
user (`runuser`), in a directory that user owns. The server listens on a free loopback port
and a private socket directory, trusts local connections (a throwaway cluster), and runs
without fsync: durability across power loss is not what these tests test, speed is.

There is no skip: a machine without the binaries fails with a message saying what to install.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import psycopg

SERVER_USER = "postgres"  # the account to run as when the tests run as root
SUPERUSER = "cleanair"  # the cluster's superuser, which the tests connect as


def bin_dir() -> Path:
    """The newest directory holding `initdb` and `pg_ctl`."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        found = subprocess.run(
            ["pg_config", "--bindir"], capture_output=True, text=True, check=True
        ).stdout.strip()
        candidates.append(found)
    for candidate in candidates:
        if (Path(candidate) / "initdb").exists() and (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    raise RuntimeError(
        "PostgreSQL server binaries (initdb, pg_ctl) were not found: install them "
        "(Debian: apt-get install postgresql) to run the PostgreSQL tests"
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """One throwaway cluster; `database()` makes a fresh, empty database on it."""

    def __init__(self, *, durable: bool = False) -> None:
        """`durable`: commits survive a crash (`halt`); otherwise the server runs without
        fsync and synchronous commits, which is faster and what most tests need."""
        self.durable = durable
        self.bin = bin_dir()
        self.root = Path(tempfile.mkdtemp(prefix="cleanair-pg-"))
        self.data, self.sockets = self.root / "data", self.root / "run"
        self.sockets.mkdir()
        self.port = _free_port()
        self._as_server_user: list[str] = []
        if os.geteuid() == 0:
            account = pwd.getpwnam(SERVER_USER)
            for path in (self.root, self.sockets):
                os.chown(path, account.pw_uid, account.pw_gid)
            self._as_server_user = ["runuser", "-u", SERVER_USER, "--"]

    def _run(self, *command: str) -> None:
        done = subprocess.run(
            [*self._as_server_user, *command], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(f"{command[0]} failed:\n{done.stdout}{done.stderr}{tail}")

    def start(self) -> None:
        self._run(
            str(self.bin / "initdb"),
            "-D", str(self.data),
            "-U", SUPERUSER,
            "-A", "trust",
            "-E", "UTF8",
            "--locale=C",
            "--no-sync",
        )  # fmt: skip
        self.resume()

    def halt(self) -> None:
        """Stop the server at once (as a crash would), keeping its data for `resume`."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")

    def resume(self) -> None:
        """Start a halted server again, on the same port and data."""
        options = f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 "
        options += "-c max_connections=200"
        if not self.durable:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self._run(
            str(self.bin / "pg_ctl"),
            "-D", str(self.data),
            "-l", str(self.root / "server.log"),
            "-o", options,
            "-w",
            "start",
        )  # fmt: skip

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError):
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def database(self) -> str:
        """The URL of a new, empty database."""
        name = f"t_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


_shared: PostgresServer | None = None


def shared_server() -> PostgresServer:
    """The test session's one server, started on first use and stopped when the session's
    process exits (the pytest fixture and the hypothesis state machines share it)."""
    global _shared
    if _shared is None:
        server = PostgresServer()
        try:
            server.start()
        except BaseException:
            server.stop()
            raise
        atexit.register(server.stop)
        _shared = server
    return _shared
