"""A plan process's memory (issue 34): started with its malloc arenas bounded, so the freed
blocks of plans run on threads go back rather than stay in each thread's arena, and its large
arrays are mappings of their own, given back when freed; `cleanair worker` tunes its own malloc
alike."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace
from typing import cast

import pytest

from cleanair_runtime.composition.settings import Settings
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


def test_a_plan_process_is_started_with_a_fixed_mmap_threshold_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # glibc raises its threshold once a large block is freed, and then serves the next plans'
    # arrays from a heap whose freed middle it never gives back (plan_malloc.py).
    started: list[dict[str, str]] = []

    def popen(*_: object, env: dict[str, str], **__: object) -> subprocess.Popen[bytes]:
        started.append(env)
        raise OSError("not started in this test")

    monkeypatch.setattr(subprocess, "Popen", popen)
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    started_once()
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "1048576")  # an operator's choice stands
    started_once()
    assert [env["MALLOC_MMAP_THRESHOLD_"] for env in started] == ["131072", "1048576"]


def test_cleanair_worker_tunes_its_malloc_as_a_plan_process_before_it_plans(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `cleanair worker` plans in the operator's own process, started without the plan
    # processes' environment: it sets the same with mallopt, before its runners' threads.
    from cleanair_runtime.processes import plan_malloc, worker

    events: list[object] = []

    def mallopt(parameter: int, value: int) -> int:
        events.append((parameter, value))
        return 1

    def run_plans(*_: object) -> int:
        events.append("planning")
        return 0

    monkeypatch.setattr(plan_malloc, "glibc_mallopt", mallopt)
    monkeypatch.setattr(worker, "run_plans", run_plans)
    monkeypatch.setattr(worker, "configure_logging", lambda *_, **__: None)
    settings = cast(
        Settings, SimpleNamespace(metrics_enabled=False, log_level="INFO", log_file=None)
    )
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    assert worker.work(settings, 2) == 0
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")  # an operator's choice stands (glibc read it)
    assert worker.work(settings, 2) == 0
    arenas, threshold = (-8, 1), (-3, 131072)  # M_ARENA_MAX, M_MMAP_THRESHOLD (malloc.h)
    assert events == [arenas, threshold, "planning", threshold, "planning"]


def test_glibcs_mallopt_takes_the_plan_processes_settings() -> None:
    # In a process of its own: the settings would stay in the test run's.
    script = (
        "import os; from cleanair_runtime.processes.plan_malloc import bound_malloc; "
        "print(sorted(bound_malloc({})))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.stdout.split() == ["['MALLOC_ARENA_MAX',", "'MALLOC_MMAP_THRESHOLD_']"]
