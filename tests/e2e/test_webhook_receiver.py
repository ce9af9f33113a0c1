"""Our webhook signatures verified by the Standard Webhooks reference library in a real receiver
process (issue 32's "Measured by"), and the receiver's own behaviour that delivery tests rely
on: failing N times then answering 200, with or without `Retry-After`."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cleanair_core.alerts.signatures import SigningSecret, generate_secret, message_id, sign
from cleanair_core.clock import SystemClock
from support.webhook_receiver import Receiver, running_receiver

pytestmark = pytest.mark.e2e

TIMEOUT = 30.0


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    with running_receiver(tmp_path / "receiver") as running:
        yield running


def event(n: int) -> tuple[str, bytes]:
    """An event's webhook id and its JSON body, as the outbox will send them."""
    event_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"cleanair:test-event:{n}"))
    body = {"type": "alert.started", "id": event_id, "data": {"category": "unhealthy", "n": n}}
    return message_id(event_id), json.dumps(body, separators=(",", ":")).encode()


def post(
    receiver: Receiver, secrets: list[SigningSecret], webhook_id: str, body: bytes
) -> httpx.Response:
    """One delivery attempt, signed now: the receiver's reference library checks the
    timestamp against its own (real) clock."""
    headers = sign(secrets, webhook_id, SystemClock().now(), body)
    return httpx.post(
        receiver.url,
        content=body,
        headers={**headers, "content-type": "application/json"},
        timeout=TIMEOUT,
    )


def test_our_signed_requests_verify_in_the_receiver_process(receiver: Receiver) -> None:
    secret = generate_secret()
    receiver.configure([secret.as_text()])
    sent = [event(n) for n in range(3)]
    for webhook_id, body in sent:
        assert post(receiver, [secret], webhook_id, body).status_code == 200
    got = receiver.wait_for(3)
    assert [(d.webhook_id, d.body, d.verified, d.reason) for d in got] == [
        (webhook_id, body.decode(), True, None) for webhook_id, body in sent
    ]
    assert all(d.status == 200 for d in got)


def test_during_a_rotation_a_receiver_with_either_secret_verifies(receiver: Receiver) -> None:
    old, new = generate_secret(), generate_secret()
    webhook_id, body = event(1)
    receiver.configure([old.as_text()])  # the receiver not yet told of the new secret
    post(receiver, [new, old], webhook_id, body)
    receiver.configure([new.as_text()])  # the receiver moved on to the new one
    post(receiver, [new, old], webhook_id, body)
    receiver.configure([old.as_text()])  # the rotation over: the old secret no longer signs
    post(receiver, [new], webhook_id, body)
    assert [d.verified for d in receiver.wait_for(3)] == [True, True, False]


def test_a_tampered_unsigned_or_wrongly_signed_request_does_not_verify(
    receiver: Receiver,
) -> None:
    secret = generate_secret()
    receiver.configure([secret.as_text()])
    webhook_id, body = event(1)
    headers = sign([secret], webhook_id, SystemClock().now(), body)
    tampered = body.replace(b"unhealthy", b"good")
    httpx.post(receiver.url, content=tampered, headers=headers, timeout=TIMEOUT)
    httpx.post(receiver.url, content=body, timeout=TIMEOUT)
    post(receiver, [generate_secret()], webhook_id, body)
    got = receiver.wait_for(3)
    assert [(d.verified, d.reason) for d in got] == [
        (False, "No matching signature found"),
        (False, "Missing required headers"),
        (False, "No matching signature found"),
    ]
    assert got[0].body == tampered.decode()


def test_the_receiver_fails_as_told_then_answers_200(receiver: Receiver) -> None:
    secret = generate_secret()
    receiver.configure([secret.as_text()], failures=2)
    webhook_id, body = event(1)
    statuses = [post(receiver, [secret], webhook_id, body).status_code for _ in range(4)]
    assert statuses == [500, 500, 200, 200]
    got = receiver.wait_for(4)
    assert [d.status for d in got] == statuses
    assert {d.webhook_id for d in got} == {webhook_id}  # retries: one id, de-duplicable
    assert all(d.verified for d in got)


@pytest.mark.parametrize("retry_after", ["7", "Sat, 28 Nov 2026 09:00:00 GMT"])
def test_the_receiver_answers_with_retry_after_when_told(
    receiver: Receiver, retry_after: str
) -> None:
    secret = generate_secret()
    receiver.configure([secret.as_text()], failures=1, status=503, retry_after=retry_after)
    webhook_id, body = event(1)
    first = post(receiver, [secret], webhook_id, body)
    assert (first.status_code, first.headers.get("retry-after")) == (503, retry_after)
    second = post(receiver, [secret], webhook_id, body)
    assert (second.status_code, second.headers.get("retry-after")) == (200, None)


def test_each_configuration_counts_its_failures_afresh(receiver: Receiver) -> None:
    secret = generate_secret()
    webhook_id, body = event(1)
    receiver.configure([secret.as_text()], failures=1)
    assert post(receiver, [secret], webhook_id, body).status_code == 500
    assert post(receiver, [secret], webhook_id, body).status_code == 200
    receiver.configure([secret.as_text()], failures=1)
    assert post(receiver, [secret], webhook_id, body).status_code == 500
    assert post(receiver, [secret], webhook_id, body).status_code == 200
