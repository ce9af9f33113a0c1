"""End to end, with metrics on: `cleanair serve --workers 2`, whose processes each write their
figures to the command's private directory, so that a scrape (of either process, or of the
command's metrics port) adds up both, the directory gone once the command has ended; and
`cleanair worker`, which serves its plan metrics on the metrics port."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.parser import text_string_to_metric_families

from cleanair_core.access.scopes import Scope
from cleanair_core.geo import Point
from cleanair_core.routes.network import PlanActivityType
from cleanair_runtime.composition.bootstrap import open_deployment
from cleanair_runtime.composition.settings import Settings
from support.servers import (
    CLI,
    STARTUP_S,
    free_port,
    server_env,
    spawn,
    stop,
    wait_until_serving,
)

pytestmark = pytest.mark.e2e

BATCH = 40


def livez_counts(directory: Path) -> dict[int, float]:
    """Requests to /livez each process has counted, by its pid, from its own file."""
    counts: dict[int, float] = {}
    for path in directory.glob("counter_*.db"):
        pid = int(path.stem.split("_")[1])
        values = MmapedDict.read_all_values_from_file(str(path))  # type: ignore[no-untyped-call]
        for key, value, _, _ in values:
            # [metric, sample, labels, help], as prometheus_client keys a value
            _, sample, labels, _ = json.loads(key)
            if sample == "cleanair_requests_total" and labels.get("path") == "/livez":
                counts[pid] = counts.get(pid, 0.0) + value
    return counts


def scraped_livez(url: str) -> float:
    text = httpx.get(url, timeout=10).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "cleanair_requests_total" and sample.labels["path"] == "/livez"
    )


async def probes(base: str) -> None:
    async def one() -> None:
        # A new connection each, so the kernel may hand each to either process.
        async with httpx.AsyncClient(timeout=30) as client:
            assert (await client.get(f"{base}/livez")).status_code == 200

    await asyncio.gather(*(one() for _ in range(BATCH)))


@pytest.mark.parametrize("own_port", [False, True], ids=["api-port", "metrics-port"])
def test_a_scrape_adds_up_every_serving_process(tmp_path: Path, own_port: bool) -> None:
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    metrics_port = free_port()
    settings = {"CLEANAIR_METRICS": "on", "TMPDIR": str(temporary)}
    if own_port:
        settings["CLEANAIR_METRICS_PORT"] = str(metrics_port)
    env = server_env(tmp_path, **settings)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    scrape_url = f"http://127.0.0.1:{metrics_port}/metrics" if own_port else f"{base}/metrics"
    log = tmp_path / "serve.log"
    command = spawn(env, log, "serve", "--port", str(port), "--workers", "2", session=True)
    try:
        # Both processes up, and the port (and the metrics port) answering.
        processes = wait_until_serving(command, log, 2, f"{base}/schema/openapi.json", scrape_url)
        deadline = time.monotonic() + 60
        [directory] = temporary.glob("cleanair-metrics-*")
        sent = 0
        while True:  # until each process has answered some: the kernel picks, not us
            asyncio.run(probes(base))
            sent += BATCH
            counts = livez_counts(directory)
            if all(counts.get(pid, 0) > 0 for pid in processes):
                break
            assert time.monotonic() < deadline, counts
        # A process counts a request after its answer has gone out: wait for the last ones.
        while sum((counts := livez_counts(directory)).values()) < sent:
            assert time.monotonic() < deadline, counts
            time.sleep(0.05)
        assert sum(counts.values()) == sent
        if not own_port:  # on the API's port a scrape is answered by one process or the other
            assert [scraped_livez(scrape_url) for _ in range(6)] == [sent] * 6
        else:
            assert scraped_livez(scrape_url) == sent
            assert httpx.get(f"{base}/metrics", timeout=10).status_code == 404
    finally:
        os.killpg(command.pid, signal.SIGINT)
        status = command.wait(timeout=60)
    assert status == 0, log.read_text()
    assert not list(temporary.glob("cleanair-metrics-*"))  # the command cleaned up


def failed_plans(url: str) -> float:
    text = httpx.get(url, timeout=10).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "cleanair_plans_finished_total" and sample.labels["status"] == "failed"
    )


def test_a_plan_worker_serves_its_plan_metrics_on_the_metrics_port(tmp_path: Path) -> None:
    metrics_port = free_port()
    env = server_env(
        tmp_path,
        CLEANAIR_METRICS="on",
        CLEANAIR_METRICS_PORT=str(metrics_port),
        CLEANAIR_PLAN_WORKER_IDLE_SECONDS="0.1",
    )
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    # A plan submitted as an API process would: with no street network, it fails.
    deployment = open_deployment(Settings.from_env(env), with_sources=False)
    core = deployment.core
    core.add_user("planner")
    issued = core.redeem_pairing_code(core.create_pairing_code("planner"), "plans", "127.0.0.1")
    proof = core.authorize(core.authenticate(issued.token), Scope.ROUTES_PLAN, user_owned=True)
    core.submit_plan(
        proof,
        start=Point(60.17, 24.94),
        end=Point(60.171, 24.941),
        activity=PlanActivityType.WALKING,
    )
    deployment.close()
    log = tmp_path / "worker.log"
    worker = spawn(env, log, "worker", "--concurrency", "1", session=True)
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:  # until the worker has failed the plan and says so on its port
            with contextlib.suppress(httpx.TransportError):
                if failed_plans(url) == 1:
                    break
            assert worker.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
    finally:
        stop(worker, signal.SIGTERM, timeout=30)
    assert worker.returncode == 0, log.read_text()
    with pytest.raises(httpx.TransportError):  # stopped with the worker
        httpx.get(url, timeout=2)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_metrics_port_in_use_is_one_clear_error(tmp_path: Path, workers: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        env = server_env(tmp_path, CLEANAIR_METRICS="on", CLEANAIR_METRICS_PORT=str(busy))
        done = subprocess.run(
            [CLI, "serve", "--port", str(free_port()), "--workers", workers],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 1, done.stderr
    assert f"cleanair: cannot listen on 127.0.0.1:{busy}: " in done.stderr
    assert "Traceback" not in done.stderr


def test_the_metrics_port_cannot_be_the_api_port(tmp_path: Path) -> None:
    port = free_port()
    env = server_env(tmp_path, CLEANAIR_METRICS="on", CLEANAIR_METRICS_PORT=str(port))
    done = subprocess.run(
        [CLI, "serve", "--port", str(port)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "the metrics port (CLEANAIR_METRICS_PORT) is this port" in done.stderr
