"""The access log's records, copied from a template per level, process and thread, are the
records `logging` itself would make: every field, in order, with their own times."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleanair_http.access_log import log, request_record

TIMES = ("created", "msecs", "relativeCreated")
FIELDS = st.fixed_dictionaries(
    {
        "method": st.sampled_from(["GET", "POST", None]),
        "path": st.text(max_size=20),
        "status": st.integers(100, 599),
        "duration_ms": st.floats(0, 1e6),
        "connection": st.none() | st.uuids().map(str),
    }
)


def made_by_logging(level: int, extra: dict[str, Any]) -> logging.LogRecord:
    return log.makeRecord(log.name, level, "", 0, "request", (), None, extra=extra)


def without_times(record: logging.LogRecord) -> list[tuple[str, Any]]:
    return [(k, v) for k, v in vars(record).items() if k not in TIMES]


@given(level=st.sampled_from([logging.DEBUG, logging.INFO]), extra=FIELDS)
def test_a_request_record_is_the_one_logging_makes(level: int, extra: dict[str, Any]) -> None:
    before = time.time()
    record = request_record(level, dict(extra))
    expected = made_by_logging(level, dict(extra))
    assert type(record) is logging.LogRecord
    assert without_times(record) == without_times(expected)  # the fields and their order
    assert list(vars(record)) == list(vars(expected))
    assert before <= record.created <= expected.created
    assert record.msecs == int((record.created - int(record.created)) * 1000)
    started = logging._startTime  # type: ignore[attr-defined]
    assert record.relativeCreated == (record.created - started) * 1000
    assert record.getMessage() == "request"


def test_each_thread_gets_records_with_its_own_name() -> None:
    names: dict[str, str | None] = {}

    def log_from(name: str) -> None:
        names[name] = request_record(logging.INFO, {}).threadName

    threads = [threading.Thread(target=log_from, args=(n,), name=n) for n in ("one", "two")]
    for thread in threads:
        thread.start()
        thread.join(timeout=60)
    assert names == {"one": "one", "two": "two"}
    assert request_record(logging.INFO, {}).threadName == threading.current_thread().name


class Tagged(logging.LogRecord):
    """A record factory of an embedder's."""


@pytest.fixture
def factory() -> Iterator[None]:
    before = logging.getLogRecordFactory()
    logging.setLogRecordFactory(Tagged)
    yield
    logging.setLogRecordFactory(before)


@pytest.mark.usefixtures("factory")
def test_a_record_factory_of_the_process_makes_them() -> None:
    record = request_record(logging.INFO, {"status": 200})
    assert type(record) is Tagged
    assert record.status == 200  # type: ignore[attr-defined]


@pytest.mark.parametrize("switch", ["logThreads", "logProcesses", "logMultiprocessing"])
def test_logging_switches_turned_after_a_record_still_apply(
    switch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    request_record(logging.INFO, {})  # a template made with the switch on
    monkeypatch.setattr(logging, switch, False)
    assert without_times(request_record(logging.INFO, {})) == without_times(
        made_by_logging(logging.INFO, {})
    )
