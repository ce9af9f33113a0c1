"""A plan process imports only what planning needs (issue 34: each further process under
150 MB). Litestar, httpx and httpcore took about 15 MiB of each plan process's own memory:
Litestar came with the metrics (`domain_metrics` now holds the part a plan process counts
with), httpx with the Ichnaea and Open-Meteo adapters (imported only when chosen) and with the
webhook sender (made at its first delivery, `SenderAtFirstSend`).

The plan process's entry runs in a fresh interpreter (this one has them all), as `PlanProcesses`
starts it, and stops itself once its plan runners and alert loops run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio

from cleanair_core.alerts.delivery import Delivery, Outcome, OutcomeKind
from cleanair_runtime.processes.worker import SenderAtFirstSend

#: What a plan process must not import: the HTTP stack (its API processes answer requests).
NOT_FOR_PLANS = ("litestar", "uvicorn", "httpx", "httpcore", "cleanair_http.app", "psycopg")

PROBE = """
import json, os, signal, sys
from contextlib import asynccontextmanager

from cleanair_runtime.processes import plan_processes, worker

class Stopping(worker.PlanWorker):
    @asynccontextmanager
    async def running(self):
        async with super().running():
            # Running, its signal receiver open: stop as `cleanair serve` stops it.
            os.kill(os.getpid(), signal.SIGTERM)
            yield

worker.PlanWorker = Stopping
status = plan_processes.main([str(os.getppid()), "-1"])
print(json.dumps({"status": status, "modules": sorted(sys.modules)}), flush=True)
"""


def plan_process_modules(tmp_path: Path) -> tuple[int, set[str]]:
    """The exit status of a plan process's entry and the modules it had imported."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLEANAIR_")}
    env |= {
        "CLEANAIR_DATABASE": str(tmp_path / "cleanair.db"),
        "CLEANAIR_DEFAULT_NETWORK": "false",
        "CLEANAIR_METRICS": "on",  # the metrics a plan process counts with: not Litestar's
    }
    done = subprocess.run(
        [sys.executable, "-P", "-c", PROBE],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    result = json.loads(done.stdout.splitlines()[-1])
    return result["status"], set(result["modules"])


def test_a_plan_process_imports_no_http_stack(tmp_path: Path) -> None:
    status, modules = plan_process_modules(tmp_path)
    assert status == 0
    # It did open what it plans with, and counted with prometheus_client.
    assert {"cleanair_http.plan_worker", "prometheus_client"} <= modules
    assert sorted(m for m in NOT_FOR_PLANS if m in modules) == []


class Recorded:
    """A sender recording what it was asked."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls
        calls.append("made")

    async def send(self, delivery: Delivery) -> Outcome:
        self.calls.append(f"sent {delivery.url}")
        return Outcome(OutcomeKind.DELIVERED, "status 204", 204)

    async def aclose(self) -> None:
        self.calls.append("closed")


def test_the_webhook_sender_is_made_once_at_its_first_delivery() -> None:
    calls: list[str] = []
    sender = SenderAtFirstSend(lambda: Recorded(calls))

    async def main() -> None:
        assert calls == []  # nothing made before a delivery
        async with anyio.create_task_group() as sending:  # two at once: still one made
            for number in (1, 2):
                sending.start_soon(sender.send, Delivery(f"https://a.example/{number}", (), b""))
        outcome = await sender.send(Delivery("https://a.example/3", (), b""))
        assert outcome == Outcome(OutcomeKind.DELIVERED, "status 204", 204)
        await sender.aclose()

    anyio.run(main)
    assert calls[0] == "made"
    assert sorted(calls[1:3]) == ["sent https://a.example/1", "sent https://a.example/2"]
    assert calls[3:] == ["sent https://a.example/3", "closed"]


def test_a_webhook_sender_never_made_closes_nothing() -> None:
    calls: list[str] = []
    anyio.run(SenderAtFirstSend(lambda: Recorded(calls)).aclose)
    assert calls == []
