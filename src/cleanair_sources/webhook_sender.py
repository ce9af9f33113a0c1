"""The `WebhookSender` port over HTTP: one POST per delivery, aimed only where the operator's
`DestinationPolicy` allows, with nothing a receiver can turn against the service.

Resolve, check, then connect to what was checked
------------------------------------------------
The sender resolves the URL's host itself (`resolve_with_the_system`: the event loop's
getaddrinfo, on a thread), asks the policy about every address, and then connects only to
those addresses: a name answering a public address to the check and 127.0.0.1 to a second
lookup (DNS rebinding) never reaches 127.0.0.1, because there is no second lookup. The pin
lives in the network backend given to httpcore (`_PinnedBackend.connect_tcp` ignores the
name and dials the checked addresses in turn); everything above the socket still speaks to
the URL's host: the Host header is the URL's authority and TLS checks the certificate
against the host name (httpcore takes the TLS server name from the request's URL, not from
the socket's address).

httpx 0.28 has no public way to hand its transport a network backend (encode/httpx#3749 is
still open), so the sender speaks to httpcore, httpx's own transport layer, whose
`AsyncConnectionPool(network_backend=...)` is public. That also keeps two httpx habits out:
it follows no redirects and reads no proxy settings from the environment (a proxy would
dial the name itself, undoing the pin), and it does not log request URLs at INFO.

One attempt, bounded
--------------------
Every send has one `deadline` (resolution, connection, TLS, request and response
together); a response body is read up to `max_response_bytes`, then dropped. Each delivery
has its own connection, closed when it ends, so nothing checked for one URL is reused for
another. Classification: 2xx delivered; 410 gone; 408, 429, 5xx, a timeout, a DNS failure
and any network or TLS error retry (with the receiver's `Retry-After`, seconds or an HTTP
date, on 429 and 503); a redirect (never followed), any other status, a URL the policy
rejects and a host with a refused address fail. Once the status is in, the outcome is
decided: a body that stalls past the deadline changes nothing.

Logs name the host, never the URL's path or query, nor a header value (they carry secrets).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable, Sequence

import httpcore
import httpx

from cleanair_core.alerts.delivery import (
    Delivery,
    Outcome,
    OutcomeKind,
    parse_retry_after,
)
from cleanair_core.alerts.destinations import (
    DestinationPolicy,
    InvalidWebhookUrl,
    IPAddress,
    WebhookUrl,
)
from cleanair_core.clock import Clock, SystemClock

logger = logging.getLogger(__name__)

#: Seconds for one whole attempt; a receiver is expected to answer at once and work later.
DEFAULT_DEADLINE = 5.0
#: Bytes of a response body read at most; nothing in it is needed but the status.
DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024

#: host, port -> the host's addresses as text.
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]

_RETRY_STATUSES = frozenset({408, 429})
_RETRY_AFTER_STATUSES = frozenset({429, 503})


async def resolve_with_the_system(host: str, port: int) -> list[str]:
    """Every address getaddrinfo gives for `host` (TCP), in its order, without repeats; run on
    the loop's resolver thread, so the event loop never waits on DNS."""
    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class _PinnedBackend(httpcore.AsyncNetworkBackend):
    """Connects to the checked addresses, whatever name httpcore asks for, and to nothing for
    any other name (there is none: the pool serves one URL)."""

    def __init__(self, host: str, addresses: Sequence[str]) -> None:
        self._host = host
        self._addresses = addresses
        self._backend = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        if host != self._host:
            raise httpcore.ConnectError("a connection to a host that was not checked")
        error: Exception = httpcore.ConnectError("no address")
        for address in self._addresses:
            try:
                return await self._backend.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except httpcore.ConnectError as refused:  # try the host's next checked address
                error = refused
        raise error

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("webhooks go over TCP only")

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


class HttpWebhookSender:
    """Implements the core `WebhookSender` over HTTP/1.1 with httpcore.

    `policy` says which URLs and addresses are allowed; `resolver` turns a host into addresses
    (tests answer what they like); `ssl_context` decides which certificates are trusted
    (httpx's default: certifi's roots); `clock` reads Retry-After dates.
    """

    def __init__(
        self,
        policy: DestinationPolicy,
        *,
        deadline: float = DEFAULT_DEADLINE,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        resolver: Resolver = resolve_with_the_system,
        ssl_context: ssl.SSLContext | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._policy = policy
        self._deadline = deadline
        self._max_response_bytes = max_response_bytes
        self._resolver = resolver
        self._ssl_context = ssl_context or httpx.create_ssl_context()
        self._clock = clock or SystemClock()
        self._closed = False

    async def aclose(self) -> None:
        """Refuse further sends. Each send holds its own connection and closes it itself, so
        nothing else is left open; a send in flight ends within its deadline."""
        self._closed = True

    async def send(self, delivery: Delivery) -> Outcome:
        """One attempt at `delivery`; see the module's docstring for what each outcome means."""
        if self._closed:
            raise RuntimeError("the webhook sender is closed")
        try:
            url = self._policy.validate_url(delivery.url)
        except InvalidWebhookUrl as invalid:
            return _logged(None, Outcome(OutcomeKind.FAILED, f"invalid url: {invalid.message}"))
        decided: list[Outcome] = []
        try:
            async with asyncio.timeout(self._deadline):
                await self._attempt(url, delivery, decided)
        except (TimeoutError, httpcore.TimeoutException):
            if not decided:
                return _logged(url.host, Outcome(OutcomeKind.RETRY, "timeout"))
        except (httpcore.NetworkError, OSError) as error:
            if not decided:
                reason = "tls" if _caused_by_tls(error) else "connection"
                return _logged(url.host, Outcome(OutcomeKind.RETRY, reason))
        except httpcore.ProtocolError:
            if not decided:
                return _logged(url.host, Outcome(OutcomeKind.RETRY, "protocol"))
        return _logged(url.host, decided[0])

    async def _attempt(self, url: WebhookUrl, delivery: Delivery, decided: list[Outcome]) -> None:
        """Resolve, check, send and read; the outcome goes into `decided` as soon as it is
        known (a refusal, or the response's status), so a stall afterwards cannot undo it."""
        addresses = await self._addresses(url)
        if addresses is None:
            decided.append(Outcome(OutcomeKind.RETRY, "dns"))
            return
        refused = self._policy.check_addresses(addresses)
        if refused is not None:
            logger.warning(
                "webhook host %s refused: it resolves to a %s address (%s)",
                url.host,
                refused.reason,
                refused.address,
            )
            decided.append(Outcome(OutcomeKind.FAILED, f"address refused: {refused.reason}"))
            return
        pool = httpcore.AsyncConnectionPool(
            ssl_context=self._ssl_context,
            max_connections=1,
            network_backend=_PinnedBackend(url.host, [str(a) for a in addresses]),
        )
        request_url = httpcore.URL(
            scheme=url.scheme, host=url.host, port=url.port, target=url.target
        )
        headers = [("Host", url.authority), *delivery.headers]
        timeouts = dict.fromkeys(("connect", "read", "write", "pool"), self._deadline)
        async with (
            pool,
            pool.stream(
                "POST",
                request_url,
                headers=headers,
                content=delivery.body,
                extensions={"timeout": timeouts},
            ) as response,
        ):
            decided.append(self._classify(response))
            read = 0
            async for chunk in response.aiter_stream():
                read += len(chunk)
                if read >= self._max_response_bytes:
                    break

    async def _addresses(self, url: WebhookUrl) -> list[IPAddress] | None:
        literal = url.address_literal
        if literal is not None:
            return [literal]
        try:
            texts = await self._resolver(url.host, url.port)
            return [ipaddress.ip_address(text) for text in texts]
        except (OSError, ValueError, UnicodeError):
            return None

    def _classify(self, response: httpcore.Response) -> Outcome:
        status = response.status
        reason = f"status {status}"
        if 200 <= status < 300:
            return Outcome(OutcomeKind.DELIVERED, reason, status)
        if 300 <= status < 400:
            return Outcome(OutcomeKind.FAILED, "redirect", status)
        if status == 410:
            return Outcome(OutcomeKind.GONE, reason, status)
        if status in _RETRY_STATUSES or 500 <= status < 600:
            retry_after = None
            if status in _RETRY_AFTER_STATUSES:
                retry_after = _retry_after(response.headers, self._clock)
            return Outcome(OutcomeKind.RETRY, reason, status, retry_after)
        return Outcome(OutcomeKind.FAILED, reason, status)


def _retry_after(headers: Sequence[tuple[bytes, bytes]], clock: Clock) -> float | None:
    for name, value in headers:
        if name.lower() == b"retry-after":
            return parse_retry_after(value.decode("latin-1"), clock.now())
    return None


def _caused_by_tls(error: BaseException) -> bool:
    cause: BaseException | None = error
    for _ in range(10):  # a chain, not a cycle: a few links are all there ever are
        if cause is None:
            return False
        if isinstance(cause, ssl.SSLError):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _logged(host: str | None, outcome: Outcome) -> Outcome:
    logger.info(
        "webhook to %s: %s (%s)", host or "an invalid url", outcome.kind.value, outcome.reason
    )
    return outcome
