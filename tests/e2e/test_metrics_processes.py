"""End to end: `cleanair serve --workers 2 ` with metrics on. Each process writes its figures
to the command's private directory, and a scrape (of either process, or of the command's
metrics port) adds up both; the directory is gone once the command has ended."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.parser import text_string_to_metric_families

from support.servers import CLI, children_of, free_port, server_env

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
    with log.open("w") as stderr:
        command = subprocess.Popen(
            [CLI, "serve", "--port", str(port), "--workers", "2"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while True:  # both processes up, and the port (and the metrics port) answering
            try:
                if len(children_of(command.pid)) == 2:
                    httpx.get(f"{base}/schema/openapi.json", timeout=1)
                    httpx.get(scrape_url, timeout=1)
                    break
            except httpx.TransportError:
                pass
            assert command.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        processes = children_of(command.pid)
        [directory] = temporary.glob("cleanair-metrics-*")
        sent = 0
        while True:  # until each process has answered some: the kernel picks, not us
            asyncio.run(probes(base))
            sent += BATCH
            counts = livez_counts(directory)
            if all(counts.get(pid, 0) > 0 for pid in processes):
                break
            assert time.monotonic() < deadline, counts
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
