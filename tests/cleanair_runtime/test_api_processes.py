"""`ApiProcesses`: the command of `serve --workers N` replaces an API process that died, after
a back-off that grows while each replacement dies soon after it started, and says why.

The processes and the clock are fakes: the back-off is seen without waiting it out. The real
thing (`kill -9` of real API processes) is tests/e2e/test_serve_workers.py."""

from __future__ import annotations

import logging
import signal

import attrs
import pytest

from cleanair_runtime.processes.api_processes import ApiProcesses
from cleanair_runtime.processes.plan_processes import (
    RESTART_DELAYS_S,
    STEADY_S,
    STOP_HEARD_WITHIN_S,
)


@attrs.define
class FakeChild:
    pid: int
    status: int | None = None

    def poll(self) -> int | None:
        return self.status


@attrs.define
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@attrs.define
class Starts:
    """The replacements started, by slot."""

    started: list[tuple[int, FakeChild]] = attrs.Factory(list)
    next_pid: int = 100

    def __call__(self, index: int) -> FakeChild:
        self.next_pid += 1
        child = FakeChild(self.next_pid)
        self.started.append((index, child))
        return child


def restart_delays(caplog: pytest.LogCaptureFixture) -> list[float | None]:
    return [
        getattr(record, "restart_in_s", None)
        for record in caplog.records
        if record.getMessage() == "an API process ended; starting another"
    ]


def test_a_process_that_dies_at_once_again_and_again_waits_longer_each_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "cleanair")
    clock, starts = Clock(), Starts()
    first = [FakeChild(1), FakeChild(2)]
    api = ApiProcesses(first, starts, clock=clock)
    dying = first[0]
    for _ in range(len(RESTART_DELAYS_S) + 2):
        dying.status = 1  # could not open the database, say
        clock.now += 0.5  # soon after it started
        api.reap()
        due = api.next_due()
        assert due is not None
        clock.now = due - 0.01
        api.restart_due()
        assert len(starts.started) < len(RESTART_DELAYS_S) + 3  # not before its time
        started_before = len(starts.started)
        clock.now = due
        api.restart_due()
        assert len(starts.started) == started_before + 1
        index, dying = starts.started[-1]
        assert index == 0  # in the place of the one that died: it polls the observations
    delays = restart_delays(caplog)
    assert delays == [*RESTART_DELAYS_S, RESTART_DELAYS_S[-1], RESTART_DELAYS_S[-1]]
    assert first[1].status is None  # the other one serves on
    assert api.next_due() is None


def test_one_that_lived_long_is_replaced_after_the_first_delay_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "cleanair")
    clock, starts = Clock(), Starts()
    child = FakeChild(1)
    api = ApiProcesses([child], starts, clock=clock)
    for lived in (1.0, 1.0, STEADY_S + 1):
        child.status = -signal.SIGKILL
        clock.now += lived
        api.reap()
        due = api.next_due()
        assert due is not None
        clock.now = due
        api.restart_due()
        child = starts.started[-1][1]
    assert restart_delays(caplog) == [RESTART_DELAYS_S[0], RESTART_DELAYS_S[1], RESTART_DELAYS_S[0]]
    ended = [record for record in caplog.records if record.levelname == "ERROR"]
    assert [getattr(record, "status", None) for record in ended] == [-signal.SIGKILL] * 3


def test_a_stop_replaces_none_and_counts_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    killed: list[tuple[int, int]] = []
    monkeypatch.setattr("os.kill", lambda pid, signum: killed.append((pid, signum)))
    clock, starts = Clock(), Starts()
    children = [FakeChild(1), FakeChild(2), FakeChild(3), FakeChild(4)]
    api = ApiProcesses(children, starts, clock=clock)
    children[0].status = -signal.SIGKILL
    api.reap()  # its replacement is due in a second
    api.stop()
    assert sorted(killed) == [(2, signal.SIGTERM), (3, signal.SIGTERM), (4, signal.SIGTERM)]
    assert api.next_due() is None
    clock.now += 3600
    api.restart_due()
    assert not starts.started
    # Stopped cleanly; failed; ended by the SIGTERM before it had a handler for it.
    children[1].status, children[2].status, children[3].status = 0, 1, -signal.SIGTERM
    api.reap()
    assert api.done()
    # The one killed before the stop was replaceable (not a failure of the stop); the one
    # that failed to stop cleanly is.
    assert api.failed == 1


def test_one_that_stopped_by_itself_waits_for_a_stop_on_its_way(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A service manager's SIGTERM to every process may reach an API process first: it is
    # replaced only once no stop has followed.
    caplog.set_level(logging.INFO, "cleanair")
    clock, starts = Clock(), Starts()
    child = FakeChild(1)
    api = ApiProcesses([child], starts, clock=clock)
    child.status = 0
    api.reap()
    assert api.next_due() == clock.now + max(RESTART_DELAYS_S[0], STOP_HEARD_WITHIN_S)
    api.stop()
    clock.now += 60
    api.restart_due()
    assert not starts.started
    assert api.done()
    assert api.failed == 0
    assert "stopped by itself" not in caplog.text


def test_a_replacement_that_cannot_be_started_is_tried_again_later(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "cleanair")
    clock = Clock()
    attempts: list[float] = []

    def out_of_processes(index: int) -> FakeChild:
        attempts.append(clock.now)
        raise BlockingIOError("Resource temporarily unavailable")

    child = FakeChild(1, status=-signal.SIGKILL)
    api = ApiProcesses([child], out_of_processes, clock=clock)
    api.reap()
    for _ in range(3):
        due = api.next_due()
        assert due is not None
        clock.now = due
        api.restart_due()
    assert len(attempts) == 3
    assert attempts[2] - attempts[1] > attempts[1] - attempts[0]  # backing off
    assert caplog.text.count("could not start an API process") == 3
