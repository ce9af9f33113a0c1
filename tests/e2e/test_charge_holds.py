"""End to end: a server killed between its debit and its answer leaves no charge behind,
and one killed after answering keeps it.

Real `cleanair serve` processes on one SQLite database, over a fake Open-Meteo on loopback
that can be told to stop answering (so a score call is caught in flight, its credit held).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import httpx
import pytest

from support.fake_open_meteo import FakeOpenMeteo
from support.servers import pair, running_server, server_env

pytestmark = pytest.mark.e2e

HOLD_SECONDS = 2
SCORE = {"lat": 60.17, "lon": 24.94}


def over_open_meteo(tmp_path: Path, upstream: FakeOpenMeteo) -> dict[str, str]:
    """A quick server on `upstream` for its air, with a short hold."""
    return server_env(
        tmp_path,
        CLEANAIR_AIR_QUALITY_SOURCE="open-meteo",
        CLEANAIR_OPEN_METEO_URL=upstream.url,
        CLEANAIR_OPEN_METEO_TIMEOUT="60",
        CLEANAIR_CHARGE_HOLD_SECONDS=str(HOLD_SECONDS),
    )


def used(base: str, headers: dict[str, str]) -> int:
    quota = httpx.get(f"{base}/v1/quota", headers=headers, timeout=10)
    assert quota.status_code == 200, quota.text
    credits: int = quota.json()["used"]
    return credits


def test_a_call_cut_off_by_kill_9_is_refunded_and_an_answered_one_is_not(
    tmp_path: Path,
) -> None:
    with FakeOpenMeteo().running() as upstream:
        env = over_open_meteo(tmp_path, upstream)
        with running_server(env, tmp_path / "first.log") as first:
            headers = pair(env, first.base)
            answered = httpx.post(
                f"{first.base}/v1/airquality/score", json=SCORE, headers=headers, timeout=10
            )
            assert answered.status_code == 200  # acknowledged: this credit must survive
            upstream.hold()
            cut_off: list[BaseException] = []

            def score_in_flight() -> None:
                try:
                    httpx.post(
                        f"{first.base}/v1/airquality/score",
                        json={"lat": 48.85, "lon": 2.35},  # another cell: not in the cache
                        headers=headers,
                        timeout=30,
                    )
                except httpx.TransportError as exc:  # the server dies before answering
                    cut_off.append(exc)

            in_flight = threading.Thread(target=score_in_flight)
            in_flight.start()
            # The server asks upstream only after reserving the credit.
            assert upstream.waiting.acquire(timeout=20)
            assert used(first.base, headers) == 2
            first.process.kill()
            first.process.wait(timeout=10)
            in_flight.join(timeout=30)
            assert len(cut_off) == 1  # the caller never got an answer

        with running_server(env, tmp_path / "second.log") as second:
            deadline = time.monotonic() + 20
            while (credits := used(second.base, headers)) != 1:
                assert credits == 2, credits
                assert time.monotonic() < deadline, "the cut-off call was never refunded"
                time.sleep(0.1)
            # What is left is the answered call's credit, which no sweep takes back.
            second.wait_for_log("refunded charges whose calls were never answered")


def holds(database: Path) -> list[float]:
    """The ends of the holds in the server's database (read as an operator could)."""
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as connection:
        return [row[0] for row in connection.execute("SELECT until FROM charge_holds")]


def test_a_call_longer_than_the_hold_is_renewed_and_stays_charged(tmp_path: Path) -> None:
    with FakeOpenMeteo().running() as upstream:
        env = over_open_meteo(tmp_path, upstream)
        database = Path(env["CLEANAIR_DATABASE"])
        with running_server(env, tmp_path / "server.log") as server:
            headers = pair(env, server.base)
            upstream.hold()
            answers: list[httpx.Response] = []
            slow = threading.Thread(
                target=lambda: answers.append(
                    httpx.post(
                        f"{server.base}/v1/airquality/score",
                        json=SCORE,
                        headers=headers,
                        timeout=30,
                    )
                )
            )
            slow.start()
            assert upstream.waiting.acquire(timeout=20)
            # Renewed every third of the hold: four different ends seen means the call has
            # outlived its first hold (2 s) by the time it is let through.
            ends: set[float] = set()
            deadline = time.monotonic() + 20
            while len(ends) < 4:
                ends.update(holds(database))
                assert time.monotonic() < deadline, ends
                time.sleep(0.05)
            upstream.release()
            slow.join(timeout=30)
            assert [answer.status_code for answer in answers] == [200]
            assert used(server.base, headers) == 1
            assert holds(database) == []  # confirmed
        assert "refunded charges" not in (tmp_path / "server.log").read_text()
