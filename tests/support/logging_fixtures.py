"""Tests that run a command in process configure the process's logging: put it back."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from cleanair_runtime.logs import stop_logging


@pytest.fixture(autouse=True)
def restored_logging() -> Iterator[None]:
    """`configure_logging` (a test's own, or `serve`'s run in process by `cli.main`) points the
    root logger at the log writer and the writer at this test's stderr, which pytest closes
    after the test: later tests' lines would go to a closed stream. Stop the writer and put the
    loggers back."""
    root, access = logging.getLogger(), logging.getLogger("cleanair.access")
    handlers, level, access_level = root.handlers[:], root.level, access.level
    try:
        yield
    finally:
        stop_logging()
        root.handlers[:] = handlers
        root.setLevel(level)
        access.setLevel(access_level)
