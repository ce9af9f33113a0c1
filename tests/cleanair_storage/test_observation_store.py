"""Contract of `ObservationStore` (the `store` fixture runs it on every adapter), and a state
machine that drives the in-memory adapter beside a durable one with the same writes."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import threading
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import psycopg
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from sqlite_utils import Database

from cleanair_core.air.observations import (
    OBSERVED,
    AreaType,
    Observation,
    ObservationsWritten,
    Station,
    StationSummary,
    StationType,
)
from cleanair_core.air.pollutants import Pollutant
from cleanair_core.geo import Point
from cleanair_core.ports import Store
from cleanair_storage.memory import MemoryStore
from cleanair_storage.migrations import sqlite_utils_migrations
from cleanair_storage.postgres import PostgresStore
from cleanair_storage.postgres.migrations import migrate
from cleanair_storage.postgres.schema import MIGRATIONS
from cleanair_storage.sqlite import SqliteStore
from support.postgres import shared_server

H0 = datetime(2026, 3, 10, 9, tzinfo=UTC)
BERLIN = Station(
    "openaq:2178",
    "Berlin Mitte",
    Point(52.520008, 13.404954),
    StationType.TRAFFIC,
    AreaType.URBAN,
)
# Types unknown: they must come back as None, not as a default.
LYON = Station("openaq:9", "Lyon Centre", Point(45.757814, 4.832011))


def hour(n: int) -> datetime:
    return H0 + timedelta(hours=n)


def obs(station: Station, pollutant: Pollutant, n: int, value: float) -> Observation:
    return Observation(station.id, pollutant, hour(n), value)


@pytest.fixture
def stations(store: Store) -> Store:
    store.put_stations([BERLIN, LYON])
    return store


# -- stations -----------------------------------------------------------------------------------


def test_stations_round_trip_by_id_with_unknown_types_as_none(store: Store) -> None:
    assert store.put_stations([LYON, BERLIN]) == 2
    assert store.list_stations() == [BERLIN, LYON]  # "openaq:2178" < "openaq:9"


def test_putting_a_station_again_updates_it(stations: Store) -> None:
    moved = Station(LYON.id, "Lyon Gerland", Point(45.73, 4.83), StationType.BACKGROUND)
    assert stations.put_stations([moved]) == 1
    assert stations.list_stations() == [BERLIN, moved]


def test_putting_stations_changes_the_version_and_putting_none_does_not(store: Store) -> None:
    before = store.observations_version()
    assert store.put_stations([]) == 0
    assert store.observations_version() == before
    store.put_stations([BERLIN])
    assert store.observations_version() != before


# -- writing observations -----------------------------------------------------------------------


def test_observations_round_trip_exactly(stations: Store) -> None:
    given = [
        obs(BERLIN, Pollutant.NO2, 0, 41.25),
        obs(LYON, Pollutant.PM25, 1, 0.0),
        obs(BERLIN, Pollutant.O3, 2, 1e-9),
        obs(LYON, Pollutant.PM10, 3, 123456.789012345),
    ]
    assert stations.put_observations(given) == ObservationsWritten(added=4)
    found = stations.observations_between(hour(0), hour(3))
    assert found == given
    assert all(o.hour_end.utcoffset() == timedelta(0) for o in found)


def test_an_hour_given_in_another_zone_is_stored_as_the_same_instant(stations: Store) -> None:
    paris = timezone(timedelta(hours=1))
    stations.put_observations(
        [Observation(BERLIN.id, Pollutant.NO2, hour(0).astimezone(paris), 7.0)]
    )
    [found] = stations.observations_between(hour(0), hour(0))
    assert found.hour_end == hour(0)
    assert found.hour_end.tzinfo is UTC


def test_putting_the_same_observations_again_changes_nothing(stations: Store) -> None:
    given = [obs(BERLIN, p, n, 10.0 + n) for p in OBSERVED for n in range(5)]
    stations.put_observations(given)
    version = stations.observations_version()

    assert stations.put_observations(given) == ObservationsWritten(unchanged=len(given))
    assert stations.observations_version() == version
    assert stations.observations_between(hour(0), hour(4)) == sorted(
        given, key=lambda o: (o.hour_end, o.station_id, o.pollutant)
    )


def test_a_changed_value_is_replaced_and_changes_the_version(stations: Store) -> None:
    stations.put_observations(
        [obs(BERLIN, Pollutant.NO2, 0, 40.0), obs(LYON, Pollutant.NO2, 0, 5.0)]
    )
    version = stations.observations_version()

    written = stations.put_observations(
        [
            obs(BERLIN, Pollutant.NO2, 0, 42.5),
            obs(LYON, Pollutant.NO2, 0, 5.0),
            obs(LYON, Pollutant.NO2, 1, 6.0),
        ]
    )

    assert written == ObservationsWritten(added=1, replaced=1, unchanged=1)
    assert stations.observations_version() != version
    assert [o.value for o in stations.observations_between(hour(0), hour(1))] == [42.5, 5.0, 6.0]


def test_a_key_given_twice_in_one_call_counts_one_row_after_another(stations: Store) -> None:
    stations.put_observations([obs(BERLIN, Pollutant.NO2, 0, 1.0)])
    written = stations.put_observations(
        [
            obs(BERLIN, Pollutant.NO2, 0, 2.0),  # replaced
            obs(BERLIN, Pollutant.NO2, 0, 2.0),  # unchanged
            obs(BERLIN, Pollutant.NO2, 0, 1.0),  # replaced, back to what was stored
            obs(LYON, Pollutant.O3, 0, 3.0),  # added
            obs(LYON, Pollutant.O3, 0, 4.0),  # replaced
        ]
    )
    assert written == ObservationsWritten(added=1, replaced=3, unchanged=1)
    assert [o.value for o in stations.observations_between(hour(0), hour(0))] == [1.0, 4.0]


def test_an_empty_batch_writes_nothing(stations: Store) -> None:
    version = stations.observations_version()
    assert stations.put_observations([]) == ObservationsWritten()
    assert stations.observations_version() == version


@pytest.mark.parametrize("bad_at", [0, -1])
def test_an_unknown_station_writes_nothing(stations: Store, bad_at: int) -> None:
    batch = [obs(BERLIN, Pollutant.NO2, n, 1.0) for n in range(50)]
    batch.insert(
        len(batch) if bad_at == -1 else 0, Observation("openaq:404", Pollutant.NO2, hour(0), 1.0)
    )
    version = stations.observations_version()

    with pytest.raises(ValueError, match="station that is not stored"):
        stations.put_observations(batch)

    assert stations.observations_between(hour(0), hour(60)) == []
    assert stations.observations_version() == version


def test_a_pollutant_stations_do_not_report_writes_nothing(stations: Store) -> None:
    with pytest.raises(ValueError, match="pollutant"):
        stations.put_observations(
            [obs(BERLIN, Pollutant.NO2, 0, 1.0), obs(BERLIN, Pollutant.CO2, 0, 400.0)]
        )
    assert stations.observations_between(hour(0), hour(0)) == []


def test_chunks_in_one_unit_of_work_are_written_together(stations: Store) -> None:
    chunks = [
        [obs(BERLIN, Pollutant.PM25, n, float(n)) for n in range(i, i + 10)] for i in (0, 10, 20)
    ]
    total = ObservationsWritten()
    with stations.transaction() as tx:
        tx.put_stations([BERLIN])
        for chunk in chunks:
            total += tx.put_observations(chunk)
        # the unit of work reads what it has written
        assert len(tx.observations_between(hour(0), hour(29))) == 30
    assert total == ObservationsWritten(added=30)
    assert len(stations.observations_between(hour(0), hour(29))) == 30


def test_an_exception_leaving_the_unit_of_work_undoes_every_chunk(stations: Store) -> None:
    stations.put_observations([obs(BERLIN, Pollutant.NO2, 0, 1.0)])
    version = stations.observations_version()
    before = stations.observations_between(hour(0), hour(99))

    class Interrupted(Exception):
        pass

    def import_then_fail() -> None:
        with stations.transaction() as tx:
            tx.put_stations([Station("openaq:1", "New", Point(1.0, 2.0))])
            tx.put_observations(
                [obs(BERLIN, Pollutant.NO2, 0, 2.0), obs(BERLIN, Pollutant.NO2, 1, 3.0)]
            )
            tx.put_observations([obs(LYON, Pollutant.O3, n, 4.0) for n in range(10)])
            tx.delete_observations_before(hour(1))
            raise Interrupted

    with pytest.raises(Interrupted):
        import_then_fail()

    assert stations.observations_between(hour(0), hour(99)) == before
    assert stations.list_stations() == [BERLIN, LYON]
    assert stations.observations_version() == version


def test_a_bad_chunk_in_a_unit_of_work_undoes_the_chunks_before_it(stations: Store) -> None:
    def import_with_a_bad_chunk() -> None:
        with stations.transaction() as tx:
            tx.put_observations([obs(BERLIN, Pollutant.NO2, 0, 1.0)])
            tx.put_observations([Observation("openaq:404", Pollutant.NO2, hour(1), 1.0)])

    with pytest.raises(ValueError, match="station that is not stored"):
        import_with_a_bad_chunk()
    assert stations.observations_between(hour(0), hour(1)) == []


# -- reading ------------------------------------------------------------------------------------


def test_observations_between_includes_both_bounds_in_order(stations: Store) -> None:
    stations.put_observations(
        [
            obs(LYON, Pollutant.PM25, 2, 1.0),
            obs(BERLIN, Pollutant.PM25, 2, 2.0),
            obs(BERLIN, Pollutant.NO2, 2, 3.0),
            obs(BERLIN, Pollutant.NO2, 1, 4.0),
            obs(BERLIN, Pollutant.NO2, 0, 5.0),
            obs(BERLIN, Pollutant.NO2, 3, 6.0),
            obs(LYON, Pollutant.O3, 1, 7.0),
        ]
    )
    found = stations.observations_between(hour(1), hour(2))
    assert [(o.hour_end, o.station_id, o.pollutant) for o in found] == [
        (hour(1), BERLIN.id, Pollutant.NO2),
        (hour(1), LYON.id, Pollutant.O3),
        (hour(2), BERLIN.id, Pollutant.NO2),
        (hour(2), BERLIN.id, Pollutant.PM25),
        (hour(2), LYON.id, Pollutant.PM25),
    ]
    # bounds between two hours take the hours inside them only
    inner = stations.observations_between(
        hour(0) + timedelta(seconds=1), hour(2) - timedelta(microseconds=1)
    )
    assert [o.hour_end for o in inner] == [hour(1), hour(1)]
    assert stations.observations_between(hour(3), hour(2)) == []


def test_observations_between_keeps_only_the_pollutants_asked_for(stations: Store) -> None:
    stations.put_observations([obs(BERLIN, p, 0, 1.0) for p in OBSERVED])
    found = stations.observations_between(hour(0), hour(0), [Pollutant.O3, Pollutant.PM10])
    assert [o.pollutant for o in found] == [Pollutant.O3, Pollutant.PM10]
    assert stations.observations_between(hour(0), hour(0), []) == []


def test_delete_observations_before_keeps_the_cutoff_hour_and_the_stations(stations: Store) -> None:
    stations.put_observations([obs(BERLIN, Pollutant.NO2, n, 1.0) for n in range(5)])
    version = stations.observations_version()

    assert stations.delete_observations_before(hour(3)) == 3
    assert [o.hour_end for o in stations.observations_between(hour(0), hour(9))] == [
        hour(3),
        hour(4),
    ]
    assert stations.list_stations() == [BERLIN, LYON]
    assert stations.observations_version() != version

    version = stations.observations_version()
    assert stations.delete_observations_before(hour(3)) == 0
    assert stations.observations_version() == version


def test_station_summaries_count_and_span_each_station(stations: Store) -> None:
    stations.put_observations(
        [obs(BERLIN, Pollutant.NO2, n, 1.0) for n in (4, 0, 7)]
        + [obs(BERLIN, Pollutant.PM25, 9, 1.0)]
    )
    assert stations.station_summaries() == [
        StationSummary(BERLIN, 4, hour(0), hour(9)),
        StationSummary(LYON, 0, None, None),
    ]


# -- across processes ---------------------------------------------------------------------------


def test_a_second_sqlite_store_on_the_file_sees_every_version_change(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    writer, reader = SqliteStore(path), SqliteStore(path)
    try:
        seen = [reader.observations_version()]
        writer.put_stations([BERLIN])
        seen.append(reader.observations_version())
        writer.put_observations([obs(BERLIN, Pollutant.NO2, 0, 1.0)])
        seen.append(reader.observations_version())
        writer.put_observations([obs(BERLIN, Pollutant.NO2, 0, 1.0)])  # unchanged
        seen.append(reader.observations_version())
        writer.delete_observations_before(hour(1))
        seen.append(reader.observations_version())

        assert seen[0] != seen[1] != seen[2] == seen[3] != seen[4]
        assert len(set(seen)) == 4
        assert reader.list_stations() == [BERLIN]
    finally:
        writer.close()
        reader.close()


def test_a_second_postgres_store_sees_every_version_change(postgres_url: str) -> None:
    writer, reader = PostgresStore(postgres_url), PostgresStore(postgres_url)
    try:
        before = reader.observations_version()
        writer.put_stations([BERLIN])
        after_stations = reader.observations_version()
        writer.put_observations([obs(BERLIN, Pollutant.NO2, 0, 1.0)])
        after_put = reader.observations_version()
        assert before != after_stations != after_put
        assert reader.observations_between(hour(0), hour(0)) == [obs(BERLIN, Pollutant.NO2, 0, 1.0)]
    finally:
        writer.close()
        reader.close()


def test_writers_racing_with_one_batch_count_it_added_once(stations: Store) -> None:
    """Two imports of the same file at once: one adds every hour, the other finds them."""
    batch = [obs(BERLIN, p, n, float(n)) for p in OBSERVED for n in range(200)]
    start = threading.Barrier(2)
    written: list[ObservationsWritten] = []
    errors: list[BaseException] = []

    def put() -> None:
        try:
            start.wait(timeout=30)
            written.append(stations.put_observations(batch))
        except BaseException as exc:  # reported below: a thread's failure must fail the test
            errors.append(exc)

    threads = [threading.Thread(target=put) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert sorted(written, key=lambda w: w.added) == [
        ObservationsWritten(unchanged=len(batch)),
        ObservationsWritten(added=len(batch)),
    ]


def test_a_sqlite_database_from_before_observations_gets_them_empty(tmp_path: Path) -> None:
    path = tmp_path / "older.db"
    with sqlite3.connect(path) as conn:
        sqlite_utils_migrations().apply(Database(conn), stop_before="m008_station_observations")
    conn.close()
    store = SqliteStore(path)
    try:
        assert store.schema_is_current()
        assert store.station_summaries() == []
        version = store.observations_version()
        store.put_stations([BERLIN])
        assert store.observations_version() != version
    finally:
        store.close()


def test_a_postgres_database_from_before_observations_gets_them_empty(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as before:
        before.setattr("cleanair_storage.postgres.migrations.MIGRATIONS", MIGRATIONS[:2])
        with psycopg.connect(postgres_url) as conn:
            assert migrate(conn) == [1, 2]
    store = PostgresStore(postgres_url)
    try:
        assert store.schema_is_current()
        assert store.station_summaries() == []
        version = store.observations_version()
        store.put_stations([BERLIN])
        assert store.observations_version() != version
    finally:
        store.close()


# -- the memory adapter beside a durable one ----------------------------------------------------

MACHINE_STATIONS = [BERLIN, LYON, Station("a", "A", Point(0.0, 0.0), None, AreaType.RURAL)]
values = st.one_of(
    st.sampled_from([0.0, 1.0, 2.5]),
    st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False),
)
observations = st.builds(
    Observation,
    station_id=st.sampled_from([s.id for s in MACHINE_STATIONS] + ["unknown"]),
    pollutant=st.sampled_from(OBSERVED),
    hour_end=st.integers(min_value=0, max_value=12).map(hour),
    value=values,
)


class ObservationStoreMachine(RuleBasedStateMachine):
    """Each write runs on both adapters, which must agree on what it did and on what is
    stored, and change their versions on the same writes."""

    @staticmethod
    def open_durable(directory: Path) -> Store:
        """The durable adapter checked against memory (SQLite here)."""
        return SqliteStore(directory / "observations.db")

    def __init__(self) -> None:
        super().__init__()
        self.memory = MemoryStore()
        self.directory = Path(tempfile.mkdtemp(prefix="cleanair-observations-"))
        self.durable = self.open_durable(self.directory)
        self.versions = (self.memory.observations_version(), self.durable.observations_version())

    def teardown(self) -> None:
        self.memory.close()
        self.durable.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def both_changed_alike(self) -> None:
        now = (self.memory.observations_version(), self.durable.observations_version())
        memory_changed, durable_changed = (a != b for a, b in zip(now, self.versions, strict=True))
        assert memory_changed == durable_changed
        self.versions = now

    @rule(given=st.lists(st.sampled_from(MACHINE_STATIONS), max_size=3))
    def put_stations(self, given: list[Station]) -> None:
        assert self.memory.put_stations(given) == self.durable.put_stations(given)
        self.both_changed_alike()

    @rule(batch=st.lists(observations, max_size=20))
    def put_observations(self, batch: list[Observation]) -> None:
        outcomes: list[ObservationsWritten | str] = []
        for store in (self.memory, self.durable):
            try:
                outcomes.append(store.put_observations(batch))
            except ValueError as exc:
                outcomes.append(str(exc))
        assert outcomes[0] == outcomes[1]
        self.both_changed_alike()

    @rule(batch=st.lists(observations, max_size=10), fail=st.booleans())
    def put_in_a_unit_of_work(self, batch: list[Observation], fail: bool) -> None:
        class Abandoned(Exception):
            pass

        outcomes: list[ObservationsWritten | str] = []
        for store in (self.memory, self.durable):
            try:
                with store.transaction() as tx:
                    written = tx.put_observations(batch[: len(batch) // 2])
                    written += tx.put_observations(batch[len(batch) // 2 :])
                    if fail:
                        raise Abandoned
                outcomes.append(written)
            except ValueError as exc:
                outcomes.append(str(exc))
            except Abandoned:
                outcomes.append("abandoned")
        assert outcomes[0] == outcomes[1]
        self.both_changed_alike()

    @rule(n=st.integers(min_value=-1, max_value=14), seconds=st.sampled_from([0, 1, -1]))
    def delete_before(self, n: int, seconds: int) -> None:
        cutoff = hour(n) + timedelta(seconds=seconds)
        assert self.memory.delete_observations_before(
            cutoff
        ) == self.durable.delete_observations_before(cutoff)
        self.both_changed_alike()

    @rule(
        first=st.integers(min_value=-1, max_value=13),
        length=st.integers(min_value=0, max_value=14),
        pollutants=st.lists(st.sampled_from(OBSERVED), unique=True),
    )
    def read_between(self, first: int, length: int, pollutants: list[Pollutant]) -> None:
        start, end = hour(first), hour(first + length)
        assert self.memory.observations_between(start, end, pollutants) == (
            self.durable.observations_between(start, end, pollutants)
        )

    @invariant()
    def adapters_agree_on_what_is_stored(self) -> None:
        assert self.memory.list_stations() == self.durable.list_stations()
        assert self.memory.station_summaries() == self.durable.station_summaries()
        assert self.memory.observations_between(hour(-1), hour(14)) == (
            self.durable.observations_between(hour(-1), hour(14))
        )


ObservationStoreMachine.TestCase.settings = settings(
    max_examples=40, stateful_step_count=30, deadline=None
)
TestObservationStoreMachine = ObservationStoreMachine.TestCase


class PostgresObservationStoreMachine(ObservationStoreMachine):
    """The same machine with PostgreSQL as the durable adapter (a fresh database each run)."""

    @staticmethod
    def open_durable(directory: Path) -> Store:
        return PostgresStore(shared_server().database())


PostgresObservationStoreMachine.TestCase.settings = settings(
    max_examples=20, stateful_step_count=30, deadline=None
)
TestObservationStoreOnPostgres = PostgresObservationStoreMachine.TestCase
