"""Importing station observations as one unit of work, and pruning them by retention."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cleanair_core import CleanAir, ManualClock, Policy, TokenKeys, generate_key
from cleanair_core.air.observations import Observation, ObservationsWritten, Station
from cleanair_core.air.pollutants import Pollutant
from cleanair_core.air.screening import ObservationImport
from cleanair_core.geo import Point
from cleanair_core.ports import Store
from cleanair_storage.memory import MemoryStore

NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)
KALLIO = Station("openaq:2178", "Kallio", Point(60.18, 24.95))
MANNERHEIMINTIE = Station("openaq:2179", "Mannerheimintie", Point(60.17, 24.94))


def core_over(store: MemoryStore, retention_days: int = 400) -> CleanAir:
    policy = Policy(observation_retention_seconds=retention_days * 86_400)
    return CleanAir(store, TokenKeys(generate_key()), policy, ManualClock(NOW))


def hourly(station: Station, hours: int, value: float = 10.0) -> list[Observation]:
    return [
        Observation(station.id, Pollutant.NO2, NOW - timedelta(hours=h), value + h)
        for h in range(hours)
    ]


def with_station(station: Station, observations: list[Observation]) -> list[Station | Observation]:
    return [station, *observations]


def test_an_import_stores_stations_before_their_observations_in_chunks() -> None:
    store = MemoryStore()
    heard: list[tuple[int, ObservationsWritten]] = []
    stream: list[Station | Observation] = [
        KALLIO,
        *hourly(KALLIO, 5),
        MANNERHEIMINTIE,
        *hourly(MANNERHEIMINTIE, 2),
    ]
    done = core_over(store).import_observations(
        stream, chunk_size=3, on_chunk=lambda s, w: heard.append((s, w))
    )
    assert done == ObservationImport(2, ObservationsWritten(added=7))
    assert [w.added for _, w in heard] == [3, 6, 7]
    assert [s.observations for s in store.station_summaries()] == [5, 2]


def test_stations_after_the_last_observation_are_stored_too() -> None:
    store = MemoryStore()
    stream: list[Station | Observation] = [KALLIO, *hourly(KALLIO, 3), MANNERHEIMINTIE]
    done = core_over(store).import_observations(stream, chunk_size=3)
    assert done == ObservationImport(2, ObservationsWritten(added=3))
    assert [s.id for s in store.list_stations()] == [KALLIO.id, MANNERHEIMINTIE.id]


def test_importing_the_same_rows_again_changes_nothing() -> None:
    store = MemoryStore()
    core = core_over(store)
    stream: list[Station | Observation] = [KALLIO, *hourly(KALLIO, 4)]
    core.import_observations(stream)
    before = store.observations_between(NOW - timedelta(days=1), NOW)
    again = core.import_observations(stream, chunk_size=2).written
    assert again == ObservationsWritten(unchanged=4)
    assert store.observations_between(NOW - timedelta(days=1), NOW) == before
    changed = core.import_observations(with_station(KALLIO, hourly(KALLIO, 2, value=50.0))).written
    assert changed == ObservationsWritten(replaced=2)


class Boom(Exception):
    pass


@settings(max_examples=25, deadline=None)
@given(fail_after=st.integers(min_value=0, max_value=12), chunk=st.integers(1, 5))
def test_a_failure_anywhere_in_an_import_writes_nothing(fail_after: int, chunk: int) -> None:
    store = MemoryStore()
    core = core_over(store)
    core.import_observations(with_station(KALLIO, hourly(KALLIO, 1, value=1.0)))
    version = store.observations_version()
    before = (store.station_summaries(), store.observations_between(NOW - timedelta(1), NOW))

    def failing() -> Iterator[Station | Observation]:
        items: list[Station | Observation] = [
            KALLIO,
            *hourly(KALLIO, 6, 99.0),
            MANNERHEIMINTIE,
            *hourly(MANNERHEIMINTIE, 5),
        ]
        yield from items[:fail_after]
        raise Boom

    with pytest.raises(Boom):
        core.import_observations(failing(), chunk_size=chunk)
    assert (store.station_summaries(), store.observations_between(NOW - timedelta(1), NOW)) == (
        before
    )
    assert store.observations_version() == version


def test_an_observation_of_an_unknown_station_fails_the_whole_import() -> None:
    store = MemoryStore()
    with pytest.raises(ValueError, match="not stored"):
        core_over(store).import_observations(with_station(KALLIO, hourly(MANNERHEIMINTIE, 1)))
    assert store.list_stations() == []


def test_the_chunk_size_is_at_least_one() -> None:
    with pytest.raises(ValueError, match="chunk_size"):
        core_over(MemoryStore()).import_observations([], chunk_size=0)


def test_pruning_deletes_what_is_older_than_the_retention() -> None:
    store = MemoryStore()
    old = Observation(KALLIO.id, Pollutant.O3, NOW - timedelta(days=11), 3.0)
    edge = Observation(KALLIO.id, Pollutant.O3, NOW - timedelta(days=10), 3.0)
    store.put_stations([KALLIO])
    store.put_observations([old, edge])
    assert core_over(store, retention_days=10).prune_observations() == 1
    assert store.observations_between(NOW - timedelta(days=30), NOW) == [edge]


def test_a_retention_of_zero_keeps_observations_for_ever() -> None:
    store = MemoryStore()
    store.put_stations([KALLIO])
    store.put_observations(
        [Observation(KALLIO.id, Pollutant.O3, datetime(1990, 1, 1, tzinfo=UTC), 1.0)]
    )
    assert core_over(store, retention_days=0).prune_observations() == 0
    assert store.station_summaries()[0].observations == 1


def test_the_default_retention_is_400_days_and_never_negative() -> None:
    assert Policy().observation_retention_seconds == 400 * 86_400
    with pytest.raises(ValueError, match="observation_retention_seconds"):
        Policy(observation_retention_seconds=-1)


def test_on_every_adapter_an_import_is_all_or_nothing_and_repeatable(store: Store) -> None:
    core = CleanAir(store, TokenKeys(generate_key()), Policy(), ManualClock(NOW))
    stream = with_station(KALLIO, hourly(KALLIO, 7))
    added, unchanged = ObservationsWritten(added=7), ObservationsWritten(unchanged=7)
    assert core.import_observations(stream, chunk_size=3) == ObservationImport(1, added)
    assert core.import_observations(stream, chunk_size=3) == ObservationImport(1, unchanged)
    version = store.observations_version()

    def failing() -> Iterator[Station | Observation]:
        yield MANNERHEIMINTIE
        yield from hourly(MANNERHEIMINTIE, 5)
        yield from hourly(KALLIO, 3, value=70.0)
        raise Boom

    with pytest.raises(Boom):
        core.import_observations(failing(), chunk_size=2)
    assert [(s.station.id, s.observations) for s in store.station_summaries()] == [(KALLIO.id, 7)]
    assert {o.value for o in store.observations_between(NOW - timedelta(days=1), NOW)} == {
        10.0 + h for h in range(7)
    }
    assert store.observations_version() == version
