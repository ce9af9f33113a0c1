"""Every API process prunes station observations past their retention: at start, then hourly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import anyio
import pytest

from cleanair_core import CleanAir, ManualClock, Policy, TokenKeys, generate_key
from cleanair_core.air.observations import Observation, Station
from cleanair_core.air.pollutants import Pollutant
from cleanair_core.errors import StoreUnavailable
from cleanair_core.geo import Point
from cleanair_http.upkeep import PRUNE_OBSERVATIONS_EVERY, observation_upkeep
from cleanair_storage.memory import MemoryStore

NOW = datetime(2026, 6, 1, tzinfo=UTC)
KALLIO = Station("openaq:2178", "Kallio", Point(60.18, 24.95))


def core_with_old_and_new(retention_days: int) -> tuple[CleanAir, MemoryStore]:
    store = MemoryStore()
    store.put_stations([KALLIO])
    store.put_observations(
        [
            Observation(KALLIO.id, Pollutant.NO2, NOW - timedelta(days=500), 1.0),
            Observation(KALLIO.id, Pollutant.NO2, NOW - timedelta(days=1), 2.0),
        ]
    )
    policy = Policy(observation_retention_seconds=retention_days * 86_400)
    return CleanAir(store, TokenKeys(generate_key()), policy, ManualClock(NOW)), store


async def rounds(core: CleanAir, count: int) -> list[float]:
    """Run the upkeep until it has slept `count` times; the intervals it slept for."""
    slept: list[float] = []
    done = anyio.Event()

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) >= count:
            done.set()
            await anyio.sleep_forever()

    with anyio.fail_after(10):
        async with observation_upkeep(core, sleep=sleep):
            await done.wait()
    return slept


def test_the_upkeep_prunes_at_start_and_then_hourly() -> None:
    core, store = core_with_old_and_new(retention_days=400)
    assert anyio.run(rounds, core, 1) == [PRUNE_OBSERVATIONS_EVERY]
    assert store.station_summaries()[0].observations == 1
    assert PRUNE_OBSERVATIONS_EVERY == 3600


def test_a_failed_round_is_logged_and_the_next_one_tries_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    core, store = core_with_old_and_new(retention_days=400)
    failures = iter([StoreUnavailable("down"), RuntimeError("bug")])
    delete = store.delete_observations_before

    def flaky(cutoff: datetime) -> int:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return delete(cutoff)

    monkeypatch.setattr(store, "delete_observations_before", flaky)
    assert len(anyio.run(rounds, core, 3)) == 3
    assert store.station_summaries()[0].observations == 1
    assert "the database is unavailable" in caplog.text
    assert "could not prune observations" in caplog.text


def test_a_retention_of_zero_runs_no_upkeep() -> None:
    core, store = core_with_old_and_new(retention_days=0)

    async def enter_and_leave() -> None:
        async def never(_: float) -> None:
            raise AssertionError("no round expected")

        async with observation_upkeep(core, sleep=never):
            await anyio.lowlevel.checkpoint()

    anyio.run(enter_and_leave)
    assert store.station_summaries()[0].observations == 2
