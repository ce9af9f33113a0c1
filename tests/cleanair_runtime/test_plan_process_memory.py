"""A plan process's memory (issue 34): started with its malloc arenas bounded, so the freed
blocks of plans run on threads go back rather than stay in each thread's arena."""

from __future__ import annotations

import subprocess

import pytest

from cleanair_runtime.processes.plan_processes import PlanProcesses


def started_once() -> None:
    """Start a plan process (its first try is made before `start` returns), then stop."""
    planners = PlanProcesses.start(1, None)
    planners.stop()
    assert planners.wait() == 1  # it could not be started


def test_a_plan_process_is_started_with_one_malloc_arena_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[dict[str, str]] = []

    def popen(*_: object, env: dict[str, str], **__: object) -> subprocess.Popen[bytes]:
        started.append(env)
        raise OSError("not started in this test")

    monkeypatch.setattr(subprocess, "Popen", popen)
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.setenv("CLEANAIR_TEST_MARK", "kept")
    started_once()
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")  # an operator's choice stands
    started_once()
    assert [env["MALLOC_ARENA_MAX"] for env in started] == ["1", "4"]
    assert all(env["CLEANAIR_TEST_MARK"] == "kept" for env in started)
