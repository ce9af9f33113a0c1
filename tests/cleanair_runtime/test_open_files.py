"""A failing `accept()` (out of descriptors) is logged once a minute at most, without a
traceback; every other loop error as asyncio logs it. The clock is a fake."""

from __future__ import annotations

import asyncio
import errno
import logging

import pytest

from cleanair_runtime.processes.open_files import ACCEPT_ERROR_EVERY_S, AcceptErrors, RefusalLines


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def out_of_descriptors() -> dict[str, object]:
    # What asyncio's selector loop hands its exception handler, on every failed accept().
    return {
        "message": "socket.accept() out of system resource",
        "exception": OSError(errno.EMFILE, "Too many open files"),
    }


def test_a_failing_accept_is_logged_once_an_interval_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    clock = Clock()
    handler = AcceptErrors(clock=clock)
    loop = asyncio.new_event_loop()
    try:
        for _ in range(5000):  # as asyncio retries, up to the backlog per turn of the loop
            handler(loop, out_of_descriptors())
            clock.now += 0.001
        clock.now += ACCEPT_ERROR_EVERY_S
        handler(loop, out_of_descriptors())
    finally:
        loop.close()
    records = [record for record in caplog.records if record.name == "cleanair.server"]
    assert [record.getMessage() for record in records] == [
        "cannot accept connections: out of file descriptors or memory"
    ] * 2
    assert all(record.exc_info is None for record in records)
    assert [getattr(record, "failures", None) for record in records] == [1, 5000]
    assert getattr(records[0], "error", None) == "Too many open files"


def test_other_loop_errors_are_logged_as_asyncio_does(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    loop = asyncio.new_event_loop()
    try:
        AcceptErrors()(loop, {"message": "Task exception was never retrieved"})
    finally:
        loop.close()
    (record,) = [record for record in caplog.records if record.levelno >= logging.ERROR]
    assert record.name == "asyncio"
    assert record.getMessage().startswith("Task exception was never retrieved")


def test_uvicorns_line_for_a_refused_request_is_written_once_an_interval() -> None:
    clock = Clock()
    lines = RefusalLines(clock=clock)

    def refused() -> logging.LogRecord:
        # As uvicorn logs it for every request beyond the cap.
        return logging.LogRecord(
            "uvicorn.error", logging.WARNING, "", 0, "Exceeded concurrency limit.", None, None
        )

    passed = []
    for _ in range(1000):
        record = refused()
        if lines.filter(record):
            passed.append(record)
        clock.now += 0.001
    clock.now += ACCEPT_ERROR_EVERY_S
    last = refused()
    assert lines.filter(last)
    assert len(passed) == 1
    assert getattr(last, "refused", None) == 1000
    other = logging.LogRecord("uvicorn.error", logging.INFO, "", 0, "Shutting down", None, None)
    assert lines.filter(other)
