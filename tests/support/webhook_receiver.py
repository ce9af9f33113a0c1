"""A webhook receiver in a process of its own, for tests of webhook delivery (issue 32).

It listens on 127.0.0.1 on a port the system chooses, verifies every POST with the Standard
Webhooks reference library (`standardwebhooks`), as a customer's receiver would, and records
each request as one JSON line: its `webhook-id`, whether it verified (and the library's reason
when not), the body and the status it answered. It answers every request as told, verified
or not, so that a signing bug shows as a record with `verified: false` rather than as retries
that hide it.

It is told what to do by a control file the test rewrites at any time (`Receiver.configure`):
the secrets to verify with (a subscription's secret exists only once the receiver's URL has
been given, so it comes after the start), and to answer the next N requests with a failure
status (500 by default) and, if asked, a `Retry-After` header, then 200.

Run as a script (`python -P webhook_receiver.py DIRECTORY`), it is the receiver; the test side is
`running_receiver(directory)`. The script needs only the standard library and the reference
library.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

CONTROL = "control.json"
DELIVERIES = "deliveries.jsonl"
PORT = "port"
LOG = "receiver.log"

#: Seconds the receiver process has to be up, and the test side waits for deliveries: long,
#: for a loaded 2-core machine, and bounded, so a receiver that never starts fails the test.
STARTUP_S = 120.0
WAIT_S = 60.0
#: The largest body the receiver reads: webhooks are small (the specification: under 20 kB).
MAX_BODY = 1 << 20


# -- the receiver process ---------------------------------------------------------------------
def verification(secrets: Sequence[str], body: bytes, headers: dict[str, str]) -> str | None:
    """None when one of `secrets` verifies the request with the reference library, else why
    not (the library's message, which never holds a secret)."""
    from standardwebhooks.webhooks import Webhook

    if not secrets:
        return "no secret configured"
    reason = ""
    for secret in secrets:
        try:
            Webhook(secret).verify(body, headers, json_parse=False)
        except Exception as error:  # any failure (a malformed header too) fails verification
            reason = str(error) or type(error).__name__
        else:
            return None
    return reason


@dataclass
class _Failures:
    """How many failures the receiver has answered, and requests held, under which
    configuration."""

    generation: int | None = None
    answered: int = 0
    held: int = 0


def serve(directory: Path) -> None:
    """Receive webhooks on 127.0.0.1 until SIGTERM or SIGINT; write the port to `directory /
    PORT` once listening."""
    lock = threading.Lock()
    failures = _Failures()
    deliveries = directory / DELIVERIES

    def control() -> dict[str, Any]:
        try:
            settings: dict[str, Any] = json.loads((directory / CONTROL).read_text())
        except FileNotFoundError:
            settings = {}
        return settings

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            if length > MAX_BODY:
                self.send_error(413)
                return
            body = self.rfile.read(length)
            settings = control()
            reason = verification(settings.get("secrets", []), body, dict(self.headers.items()))
            with lock:
                # A new configuration starts its count of failures afresh.
                if failures.generation != settings.get("generation"):
                    failures.generation, failures.answered = settings.get("generation"), 0
                    failures.held = 0
                failing = failures.answered < settings.get("failures", 0)
                if failing:
                    failures.answered += 1
                holding = failures.held < settings.get("holds", 0)
                if holding:
                    failures.held += 1
                status = settings.get("status", 500) if failing else 200
                record = {
                    "webhook_id": self.headers.get("webhook-id"),
                    "webhook_timestamp": self.headers.get("webhook-timestamp"),
                    "verified": reason is None,
                    "reason": reason,
                    "body": body.decode("utf-8", errors="replace"),
                    "path": self.path,
                    "status": status,
                    "held": holding,
                }
                # Recorded before the answer: once a sender has its answer, the record is there.
                with deliveries.open("a") as out:
                    out.write(json.dumps(record) + "\n")
            if holding:
                # Told to keep the sender waiting (a test kills it meanwhile): the record is
                # written, the answer comes only after the hold, if anyone still listens.
                time.sleep(float(settings.get("hold_s", 60)))
            answer = b"failing as told\n" if failing else b"received\n"
            self.send_response(status)
            if failing and settings.get("retry_after") is not None:
                self.send_header("retry-after", str(settings["retry_after"]))
            self.send_header("content-type", "text/plain")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: object) -> None:
            """Quiet: what the receiver got is in its records."""

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    ready = directory / (PORT + ".tmp")
    ready.write_text(str(server.server_address[1]))
    ready.replace(directory / PORT)  # whole or absent: the test never reads half a number
    try:
        server.serve_forever(poll_interval=0.1)
    except (SystemExit, KeyboardInterrupt):
        pass
    finally:
        server.server_close()


# -- the test side ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Delivery:
    """One request the receiver got."""

    webhook_id: str | None
    webhook_timestamp: str | None
    verified: bool
    reason: str | None
    body: str
    path: str
    status: int
    #: Whether the receiver held the request (`configure(holds=...)`) before answering.
    held: bool = False


@dataclass
class Receiver:
    """A running receiver process and the files it is told and tells by."""

    process: subprocess.Popen[bytes]
    directory: Path
    port: int
    generation: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/webhooks"

    def configure(
        self,
        secrets: Sequence[str] = (),
        *,
        failures: int = 0,
        status: int = 500,
        retry_after: str | None = None,
        holds: int = 0,
        hold_s: float = 60.0,
    ) -> None:
        """Verify with `secrets` (`whsec_...`) from now on, and answer the next `failures`
        requests with `status` (and `Retry-After: retry_after` when given), then 200. The
        next `holds` requests are recorded at once but answered only `hold_s` seconds later
        (a sender killed meanwhile never hears)."""
        self.generation += 1
        settings = {
            "generation": self.generation,
            "secrets": list(secrets),
            "failures": failures,
            "status": status,
            "retry_after": retry_after,
            "holds": holds,
            "hold_s": hold_s,
        }
        written = self.directory / (CONTROL + ".tmp")
        written.write_text(json.dumps(settings))
        written.replace(self.directory / CONTROL)  # the receiver reads the old or the new

    def deliveries(self) -> list[Delivery]:
        """Every request recorded so far, in the order they were answered."""
        try:
            text = (self.directory / DELIVERIES).read_text()
        except FileNotFoundError:
            return []
        # Only whole lines: the receiver may be writing the last one.
        lines = text.split("\n")[:-1]
        return [Delivery(**json.loads(line)) for line in lines]

    def wait_for(self, count: int, within: float = WAIT_S) -> list[Delivery]:
        """Poll, bounded, until at least `count` requests are recorded; all of them."""
        deadline = time.monotonic() + within
        while len(got := self.deliveries()) < count:
            assert self.process.poll() is None, self.log()
            assert time.monotonic() < deadline, f"{len(got)} of {count} deliveries: {got}"
            time.sleep(0.02)
        return got

    def log(self) -> str:
        return (self.directory / LOG).read_text()


@contextmanager
def running_receiver(directory: Path) -> Iterator[Receiver]:
    """A receiver process keeping its files in `directory` (created), stopped at the end."""
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / LOG).open("w") as log:
        # -P: the script's own directory stays off sys.path, where support/http.py would
        # shadow the standard library's http.
        process = subprocess.Popen(
            [sys.executable, "-P", __file__, str(directory)],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        deadline = time.monotonic() + STARTUP_S
        while not (directory / PORT).exists():  # bounded wait for it to listen
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError((directory / LOG).read_text())
            time.sleep(0.02)
        yield Receiver(process, directory, int((directory / PORT).read_text()))
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
