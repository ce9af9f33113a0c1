"""The HTTP webhook sender against real receivers on loopback: allowed only where the test's
policy allows 127.0.0.0/8, and never where a default policy or a refused address says no."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from email.utils import format_datetime
from pathlib import Path

import attrs
import httpcore
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cleanair_core.alerts.delivery import Delivery, Outcome, OutcomeKind, WebhookSender
from cleanair_core.alerts.destinations import (
    DestinationPolicy,
    InvalidWebhookUrl,
    parse_networks,
    refusal_of,
)
from cleanair_core.clock import ManualClock
from cleanair_sources.webhook_sender import (
    DEFAULT_MAX_RESPONSE_BYTES,
    HttpWebhookSender,
    Resolver,
    _PinnedBackend,
    resolve_with_the_system,
)

# Generous: the machine is shared and loaded; only the deadline tests wait for it.
DEADLINE = 30.0
LOOPBACK_ALLOWED = DestinationPolicy(
    allow_http=True, allowed_ports=None, allowed_networks=parse_networks(["127.0.0.0/8"])
)
HEADERS = (("content-type", "application/json"), ("webhook-id", "msg_1"))


@attrs.define
class Request:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes
    local_address: str


Respond = Callable[[Request, asyncio.StreamWriter], Awaitable[None]]


@attrs.define
class Receiver:
    """An HTTP/1.1 receiver on a loopback address that records every request and answers as
    `respond` says."""

    respond: Respond
    port: int = 0
    requests: list[Request] = attrs.Factory(list)
    connections: int = 0
    server_names: list[str | None] = attrs.Factory(list)
    bytes_sent: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = {
                name.strip().lower(): value.strip()
                for name, value in (line.split(":", 1) for line in lines[1:] if line)
            }
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            local = writer.get_extra_info("sockname")[0]
            request = Request(method, target, headers, body, local)
            self.requests.append(request)
            await self.respond(request, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


def answer(status: int, headers: Sequence[tuple[str, str]] = (), body: bytes = b"") -> Respond:
    async def respond(_: Request, writer: asyncio.StreamWriter) -> None:
        lines = [f"HTTP/1.1 {status} X", f"content-length: {len(body)}"]
        lines += [f"{name}: {value}" for name, value in headers]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        await writer.drain()

    return respond


@asynccontextmanager
async def receiving(
    receiver: Receiver, host: str = "127.0.0.1", tls: ssl.SSLContext | None = None
) -> AsyncIterator[Receiver]:
    server = await asyncio.start_server(receiver.handle, host, receiver.port, ssl=tls)
    receiver.port = server.sockets[0].getsockname()[1]
    async with server:
        try:
            yield receiver
        finally:
            server.close()
            # A handler still stalling (the deadline tests) must not outlive the test's loop.
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task() and not task.done():
                    task.cancel()


def sender(
    policy: DestinationPolicy = LOOPBACK_ALLOWED,
    *,
    resolver: Resolver = resolve_with_the_system,
    ssl_context: ssl.SSLContext | None = None,
    clock: ManualClock | None = None,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
) -> HttpWebhookSender:
    return HttpWebhookSender(
        policy,
        deadline=DEADLINE,
        resolver=resolver,
        ssl_context=ssl_context,
        clock=clock,
        max_response_bytes=max_response_bytes,
    )


def delivery(url: str, headers: tuple[tuple[str, str], ...] = HEADERS) -> Delivery:
    return Delivery(url, headers, b'{"type":"alert"}')


async def send_to(receiver: Receiver, port_sender: WebhookSender | None = None) -> Outcome:
    port = port_sender or sender()
    async with receiving(receiver):
        return await port.send(delivery(f"http://127.0.0.1:{receiver.port}/hook?token=abc"))


# Delivery and classification ----------------------------------------------------------------
def test_a_delivery_is_posted_with_its_headers_and_body() -> None:
    receiver = Receiver(answer(204))
    outcome = asyncio.run(send_to(receiver))
    assert outcome == Outcome(OutcomeKind.DELIVERED, "status 204", 204)
    (request,) = receiver.requests
    assert (request.method, request.target) == ("POST", "/hook?token=abc")
    assert request.headers["host"] == f"127.0.0.1:{receiver.port}"
    assert request.headers["webhook-id"] == "msg_1"
    assert request.headers["content-type"] == "application/json"
    assert request.body == b'{"type":"alert"}'


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (200, OutcomeKind.DELIVERED),
        (299, OutcomeKind.DELIVERED),
        (400, OutcomeKind.FAILED),
        (401, OutcomeKind.FAILED),
        (404, OutcomeKind.FAILED),
        (410, OutcomeKind.GONE),
        (408, OutcomeKind.RETRY),
        (429, OutcomeKind.RETRY),
        (500, OutcomeKind.RETRY),
        (502, OutcomeKind.RETRY),
        (503, OutcomeKind.RETRY),
    ],
)
def test_statuses_are_classified(status: int, kind: OutcomeKind) -> None:
    outcome = asyncio.run(send_to(Receiver(answer(status))))
    assert outcome == Outcome(kind, f"status {status}", status)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_a_failure_and_is_not_followed(status: int) -> None:
    async def scenario() -> tuple[Outcome, Receiver]:
        elsewhere = Receiver(answer(200))
        async with receiving(elsewhere):
            location = f"http://127.0.0.1:{elsewhere.port}/elsewhere"
            outcome = await send_to(Receiver(answer(status, [("location", location)])))
        return outcome, elsewhere

    outcome, elsewhere = asyncio.run(scenario())
    assert outcome == Outcome(OutcomeKind.FAILED, "redirect", status)
    assert elsewhere.connections == 0


def test_retry_after_in_seconds_is_honoured_on_429() -> None:
    outcome = asyncio.run(send_to(Receiver(answer(429, [("Retry-After", "120")]))))
    assert outcome == Outcome(OutcomeKind.RETRY, "status 429", 429, retry_after=120.0)


def test_retry_after_as_a_date_is_honoured_on_503() -> None:
    clock = ManualClock()
    when = format_datetime(clock.now() + timedelta(seconds=90), usegmt=True)
    outcome = asyncio.run(
        send_to(Receiver(answer(503, [("Retry-After", when)])), sender(clock=clock))
    )
    assert outcome == Outcome(OutcomeKind.RETRY, "status 503", 503, retry_after=90.0)


def test_retry_after_is_read_only_where_it_means_wait() -> None:
    outcome = asyncio.run(send_to(Receiver(answer(500, [("Retry-After", "120")]))))
    assert outcome.retry_after is None
    outcome = asyncio.run(send_to(Receiver(answer(503, [("Retry-After", "later")]))))
    assert outcome == Outcome(OutcomeKind.RETRY, "status 503", 503)


# Bounds: the body cap and the deadline -------------------------------------------------------
async def endless_body(_: Request, writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n%b\r\n" % (16384, b"x" * 16384)
    while True:  # until the sender hangs up
        writer.write(chunk)
        await writer.drain()


def test_a_huge_response_body_is_cut_at_the_cap_not_read_to_the_deadline() -> None:
    started = time.monotonic()
    outcome = asyncio.run(send_to(Receiver(endless_body), sender(max_response_bytes=64 * 1024)))
    assert outcome == Outcome(OutcomeKind.DELIVERED, "status 200", 200)
    # Reading on would take the whole deadline: the cap ends it long before.
    assert time.monotonic() - started < DEADLINE / 2


async def never_answers(_: Request, writer: asyncio.StreamWriter) -> None:
    await asyncio.Event().wait()


async def answers_then_stalls(_: Request, writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly part")
    await writer.drain()
    await asyncio.Event().wait()


def test_a_receiver_that_never_answers_hits_the_deadline_and_is_retried() -> None:
    quick = HttpWebhookSender(LOOPBACK_ALLOWED, deadline=0.5)
    started = time.monotonic()
    outcome = asyncio.run(send_to(Receiver(never_answers), quick))
    assert outcome == Outcome(OutcomeKind.RETRY, "timeout")
    assert time.monotonic() - started < DEADLINE


def test_a_body_stalling_after_a_2xx_does_not_undo_the_delivery() -> None:
    quick = HttpWebhookSender(LOOPBACK_ALLOWED, deadline=0.5)
    outcome = asyncio.run(send_to(Receiver(answers_then_stalls), quick))
    assert outcome == Outcome(OutcomeKind.DELIVERED, "status 200", 200)


def test_a_closed_port_is_a_connection_failure_to_retry() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    outcome = asyncio.run(sender().send(delivery(f"http://127.0.0.1:{port}/")))
    assert outcome == Outcome(OutcomeKind.RETRY, "connection")


# Refused destinations (SSRF) -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("host", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("169.254.169.254", "link-local"),
        ("[::1]", "loopback"),
        ("[::ffff:127.0.0.1]", "loopback"),
    ],
)
def test_a_not_public_address_is_refused_before_any_connection(host: str, reason: str) -> None:
    async def scenario() -> tuple[Outcome, Receiver]:
        async with receiving(Receiver(answer(200))) as receiver:
            policy = DestinationPolicy(allow_http=True, allowed_ports=None)  # nothing allowed
            outcome = await sender(policy).send(delivery(f"http://{host}:{receiver.port}/"))
        return outcome, receiver

    outcome, receiver = asyncio.run(scenario())
    assert outcome == Outcome(OutcomeKind.FAILED, f"address refused: {reason}")
    assert receiver.connections == 0


def fixed_resolver(
    *answers: Sequence[str],
) -> tuple[Callable[..., Awaitable[Sequence[str]]], list[str]]:
    """A resolver answering `answers` in turn (the last one again and again), and the names it
    was asked."""
    asked: list[str] = []

    async def resolve(host: str, port: int) -> Sequence[str]:
        asked.append(host)
        return answers[min(len(asked), len(answers)) - 1]

    return resolve, asked


@pytest.mark.parametrize(
    ("addresses", "reason"),
    [
        (["127.0.0.1"], "loopback"),
        (["10.1.2.3"], "private"),
        (["169.254.169.254"], "link-local"),
        (["::1"], "loopback"),
        (["8.8.8.8", "127.0.0.1"], "loopback"),  # one bad answer among good ones
        (["2001:4860:4860::8888", "fd00::1"], "private"),
        ([], "no-address"),
    ],
)
def test_a_name_resolving_to_a_refused_address_is_refused(
    addresses: list[str], reason: str
) -> None:
    resolve, asked = fixed_resolver(addresses)
    policy = DestinationPolicy()
    outcome = asyncio.run(
        sender(policy, resolver=resolve).send(delivery("https://hooks.example.com/h"))
    )
    assert outcome == Outcome(OutcomeKind.FAILED, f"address refused: {reason}")
    assert asked == ["hooks.example.com"]


def test_localhost_is_refused_through_the_systems_resolver() -> None:
    policy = DestinationPolicy(allow_http=True, allowed_ports=None)
    outcome = asyncio.run(sender(policy).send(delivery("http://localhost:8080/")))
    assert outcome == Outcome(OutcomeKind.FAILED, "address refused: loopback")


def test_a_name_that_does_not_resolve_is_retried() -> None:
    async def fails(host: str, port: int) -> Sequence[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    outcome = asyncio.run(sender(resolver=fails).send(delivery("https://nowhere.example/")))
    assert outcome == Outcome(OutcomeKind.RETRY, "dns")


def test_a_url_the_policy_rejects_fails_without_a_lookup() -> None:
    resolve, asked = fixed_resolver(["8.8.8.8"])
    outcome = asyncio.run(
        sender(DestinationPolicy(), resolver=resolve).send(delivery("http://hooks.example.com/"))
    )
    assert outcome == Outcome(OutcomeKind.FAILED, "invalid url: must use https")
    assert asked == []


def test_dns_rebinding_cannot_move_the_connection_to_an_unchecked_address() -> None:
    """The name answers an allowed address to the check and 127.0.0.1 afterwards: the sender
    asks once and connects to the address it checked, so the service on 127.0.0.1 hears
    nothing."""
    policy = DestinationPolicy(
        allow_http=True, allowed_ports=None, allowed_networks=parse_networks(["127.0.0.2/32"])
    )

    async def scenario() -> tuple[Outcome, Receiver, Receiver, list[str]]:
        async with receiving(Receiver(answer(200)), host="127.0.0.2") as checked:
            internal = Receiver(answer(200), port=checked.port)
            async with receiving(internal, host="127.0.0.1"):
                resolve, asked = fixed_resolver(["127.0.0.2"], ["127.0.0.1"])
                outcome = await sender(policy, resolver=resolve).send(
                    delivery(f"http://rebinding.test:{checked.port}/h")
                )
        return outcome, checked, internal, asked

    outcome, checked, internal, asked = asyncio.run(scenario())
    assert outcome == Outcome(OutcomeKind.DELIVERED, "status 200", 200)
    assert asked == ["rebinding.test"]
    assert [r.local_address for r in checked.requests] == ["127.0.0.2"]
    assert checked.requests[0].headers["host"] == f"rebinding.test:{checked.port}"
    assert internal.connections == 0


def test_every_checked_address_is_tried_in_turn() -> None:
    async def scenario() -> tuple[Outcome, Receiver]:
        async with receiving(Receiver(answer(200)), host="127.0.0.3") as receiver:
            # 127.0.0.4 has no listener on the port: refused, then the next address is tried.
            resolve, _ = fixed_resolver(["127.0.0.4", "127.0.0.3"])
            outcome = await sender(resolver=resolve).send(
                delivery(f"http://multi.test:{receiver.port}/")
            )
        return outcome, receiver

    outcome, receiver = asyncio.run(scenario())
    assert outcome.kind is OutcomeKind.DELIVERED
    assert [r.local_address for r in receiver.requests] == ["127.0.0.3"]


def test_the_pinned_backend_dials_no_other_name() -> None:
    backend = _PinnedBackend("hooks.example.com", ["127.0.0.1"])
    with pytest.raises(httpcore.ConnectError):
        asyncio.run(backend.connect_tcp("other.example.com", 443))
    with pytest.raises(httpcore.ConnectError):
        asyncio.run(backend.connect_unix_socket("/var/run/docker.sock"))


# TLS: the pin keeps the name for the certificate ----------------------------------------------
@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A test CA and a certificate it signed for webhook.test (no IP address in it)."""
    folder = tmp_path_factory.mktemp("tls")

    def openssl(*arguments: str) -> None:
        subprocess.run(["openssl", *arguments], cwd=folder, check=True, capture_output=True)

    openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-subj", "/CN=cleanair test CA", "-keyout", "ca.key", "-out", "ca.pem",
    )  # fmt: skip
    openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=webhook.test",
        "-keyout", "leaf.key", "-out", "leaf.csr",
    )  # fmt: skip
    (folder / "ext.cnf").write_text("subjectAltName=DNS:webhook.test\n")
    openssl(
        "x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-out", "leaf.pem",
    )  # fmt: skip
    return folder


def tls_pair(folder: Path, receiver: Receiver) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(folder / "leaf.pem", folder / "leaf.key")

    def remember(_: object, server_name: str | None, __: object) -> None:
        receiver.server_names.append(server_name)

    server.sni_callback = remember
    client = ssl.create_default_context(cafile=str(folder / "ca.pem"))
    return server, client


@pytest.mark.parametrize(("name", "kind"), [("webhook.test", "ok"), ("other.test", "tls")])
def test_https_to_a_pinned_address_checks_the_certificate_against_the_name(
    certificates: Path, name: str, kind: str
) -> None:
    async def scenario() -> tuple[Outcome, Receiver]:
        receiver = Receiver(answer(200))
        server_tls, client_tls = tls_pair(certificates, receiver)
        async with receiving(receiver, tls=server_tls):
            resolve, _ = fixed_resolver(["127.0.0.1"])
            https = DestinationPolicy(
                allowed_ports=None, allowed_networks=parse_networks(["127.0.0.0/8"])
            )
            outcome = await sender(https, resolver=resolve, ssl_context=client_tls).send(
                delivery(f"https://{name}:{receiver.port}/h")
            )
        return outcome, receiver

    outcome, receiver = asyncio.run(scenario())
    assert receiver.server_names == [name]  # the TLS server name is the URL's, not the address
    if kind == "ok":
        assert outcome == Outcome(OutcomeKind.DELIVERED, "status 200", 200)
        assert receiver.requests[0].headers["host"] == f"webhook.test:{receiver.port}"
    else:
        assert outcome == Outcome(OutcomeKind.RETRY, "tls")
        assert receiver.requests == []


# Secrets stay out of the logs, and a closed sender sends nothing ------------------------------
def test_logs_name_the_host_never_the_query_or_a_header_value(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    secret_headers = (("webhook-signature", "v1,SIGNATURESECRET"), ("x-token", "HEADERSECRET"))

    async def scenario() -> Outcome:
        async with receiving(Receiver(answer(200))) as receiver:
            url = f"http://127.0.0.1:{receiver.port}/PATHSECRET?token=QUERYSECRET"
            return await sender().send(delivery(url, secret_headers))

    assert asyncio.run(scenario()).kind is OutcomeKind.DELIVERED
    resolve, _ = fixed_resolver(["10.0.0.1"])
    refused = sender(DestinationPolicy(), resolver=resolve).send(
        delivery("https://hooks.example.com/PATHSECRET?token=QUERYSECRET", secret_headers)
    )
    assert asyncio.run(refused).kind is OutcomeKind.FAILED
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "127.0.0.1" in logged
    assert "hooks.example.com" in logged
    for secret in ("QUERYSECRET", "PATHSECRET", "SIGNATURESECRET", "HEADERSECRET"):
        assert secret not in logged


def test_a_closed_sender_refuses_to_send() -> None:
    async def scenario() -> None:
        port = sender()
        await port.aclose()
        await port.aclose()  # idempotent
        with pytest.raises(RuntimeError, match="closed"):
            await port.send(delivery("https://hooks.example.com/"))

    asyncio.run(scenario())


@settings(max_examples=60, deadline=None)
@given(
    st.one_of(
        st.text(max_size=60),
        st.builds(
            lambda scheme, rest: f"{scheme}://{rest}",
            st.sampled_from(["https", "http", "HTTPS", "ftp"]),
            st.text(max_size=60),
        ),
    )
)
def test_any_url_ends_in_an_outcome_and_a_private_answer_is_never_dialled(url: str) -> None:
    """Whatever the text, the sender answers with an outcome, and with a resolver answering
    only a private address it never gets as far as a connection."""
    with contextlib.suppress(InvalidWebhookUrl):
        literal = DestinationPolicy().validate_url(url).address_literal
        assume(literal is None or refusal_of(literal) is not None)  # never dial the internet
    resolve, _ = fixed_resolver(["10.0.0.1"])
    outcome = asyncio.run(sender(DestinationPolicy(), resolver=resolve).send(delivery(url)))
    assert outcome.kind is OutcomeKind.FAILED
    assert outcome.reason.startswith(("invalid url: ", "address refused: "))
