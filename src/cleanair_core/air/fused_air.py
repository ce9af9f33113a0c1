"""The fused air-quality source: any source (street level included) corrected by the stored
station observations, so every endpoint, the planner and an embedder get the same fused air.

The rule is `cleanair_core.air.fusion`; this module feeds it. For a sample at instant t it
uses, per pollutant, the latest hour of observations ending at or before the hour of t (within
`MAX_LEAD`), and the correction fades with the lead from that hour. Observations are read
through the `ObservationStore` port and what is computed from them is kept until the store's
`observations_version` changes (checked at most once per `recheck`), so a running server
fuses newly imported observations within a second, without a restart. With no observations
the answer is exactly the unfused source's.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Collection, Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import attrs

from cleanair_core.air.fusion import (
    FUSION_PARAMETERS,
    HOUR,
    MAX_LEAD,
    FusionParameters,
    HourObservations,
    ResidualField,
    latest_hours,
    observation_hour,
    persistence,
    residual_field,
)
from cleanair_core.air.observations import ObservationStore, Station
from cleanair_core.air.pollutants import SCORED, Concentrations, Pollutant
from cleanair_core.air.quality_source import (
    AirQualitySource,
    GriddedAir,
    Sample,
    answers_at_once,
)
from cleanair_core.clock import Clock, SystemClock
from cleanair_core.geo import Point
from cleanair_core.metrics import NO_METRICS, Metrics
from cleanair_core.offload import Offload, inline

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]

log = logging.getLogger("cleanair.fusion")

#: Hours of fields kept per process (a plan, a forecast and a few scores need a handful),
#: and hours whose latest observations are kept: both are dropped oldest first.
_FIELDS_KEPT = 256
_HOURS_KEPT = 256


#: Stations reported as correcting a point: within this distance, at most this many.
NEAR_M = 50_000.0
NEAR_KEPT = 10


@attrs.frozen
class StationUsed:
    """A station whose observation corrects the air at a point: how far it is (metres) and
    the end of the hour of its value used."""

    id: str
    name: str
    distance_m: float
    last_hour_end: datetime


class _Fields:
    """What has been computed from one version of the observations."""

    def __init__(self, version: int) -> None:
        self.version = version
        self.stations: dict[str, Station] | None = None
        self.latest: OrderedDict[datetime, dict[Pollutant, HourObservations]] = OrderedDict()
        self.fields: OrderedDict[tuple[Pollutant, datetime], ResidualField | None] = OrderedDict()


class FusedAir:
    """An `AirQualitySource`: `unfused` corrected by the stations in `observations`.

    `store_calls` runs the store's reads off the event loop (the service's offload; an
    embedder without a loop keeps `inline`). `clock` paces how often the observations'
    version is read: at most once per `recheck`.
    """

    def __init__(
        self,
        unfused: AirQualitySource,
        observations: ObservationStore,
        *,
        store_calls: Offload = inline,
        clock: Clock | None = None,
        recheck: timedelta = timedelta(seconds=1),
        parameters: dict[Pollutant, FusionParameters] | None = None,
        metrics: Metrics = NO_METRICS,
    ) -> None:
        self.unfused = unfused
        self.update_interval = unfused.update_interval
        self._store = observations
        self._store_calls = store_calls
        self._clock = clock or SystemClock()
        self._recheck = recheck
        self._parameters = FUSION_PARAMETERS if parameters is None else parameters
        self._metrics = metrics
        self._lock = threading.Lock()
        self._state = _Fields(-1)
        self._checked_at: datetime | None = None
        self._fused_before: bool | None = None

    # -- the port
    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        """The unfused answer for each sample, corrected where observations reach it."""
        answers = await self.unfused.concentrations(samples)
        if not samples:
            return answers
        # The common case (the version read within the second, the hours' observations read
        # already) needs no store call, and so no trip off the event loop.
        fresh = self._fresh()
        state = fresh if fresh is not None else await self._store_calls(self._current)
        hours = {observation_hour(sample.at) for sample in samples}
        known = self._known_latest(state, hours)
        latest = (
            known
            if known is not None
            else await self._store_calls(lambda: self._latest_for(state, hours))
        )
        wanted = self._wanted(state, latest.values())
        if wanted:
            points = [
                Sample(station.point, hour_end - HOUR / 2)
                for (_, hour_end), observed in wanted.items()
                for station, _ in observed
            ]
            airs = await self.unfused.concentrations(points)
            self._store_fields(state, wanted, _columns(airs))
        return self._corrected(state, samples, answers, latest)

    def answers_at_once(self, samples: Sequence[Sample]) -> bool:
        """See `CachingAir`: the unfused air at once, and the hours' fields computed already
        (a field not yet computed asks the unfused air at its stations)."""
        if not answers_at_once(self.unfused, samples):
            return False
        state = self._fresh()
        if state is None:  # the observations are due to be read: new ones need new fields
            return False
        known = self._known_latest(state, {observation_hour(sample.at) for sample in samples})
        return known is not None and not self._wanted(state, known.values())

    def stations_used(self, at: datetime) -> dict[Pollutant, ResidualField]:
        """The fields (and so the stations and their hour) a sample at `at` is corrected with,
        as last computed; empty before any was."""
        with self._lock:
            latest = self._state.latest.get(observation_hour(at), {})
            return {
                pollutant: field
                for pollutant, hour in latest.items()
                if (field := self._state.fields.get((pollutant, hour.hour_end))) is not None
            }

    def stations_near(
        self, point: Point, at: datetime, *, within_m: float = NEAR_M, limit: int = NEAR_KEPT
    ) -> list[StationUsed]:
        """The stations whose observations correct a sample at `point` and `at` (as last
        computed: ask `concentrations` first), nearest first, within `within_m`, at most
        `limit`; each with the end of the hour of its value used."""
        import numpy as np

        from cleanair_core.air.fusion import station_distances

        with self._lock:
            stations = dict(self._state.stations or {})
        found: dict[str, StationUsed] = {}
        for field in self.stations_used(at).values():
            distances = station_distances(
                np.array([point.lat]), np.array([point.lon]), field.lats, field.lons
            )[0]
            for station_id, distance in zip(field.stations, distances.tolist(), strict=True):
                known = found.get(station_id)
                if distance > within_m or station_id not in stations:
                    continue
                if known is None or known.last_hour_end < field.hour_end:
                    found[station_id] = StationUsed(
                        station_id, stations[station_id].name, distance, field.hour_end
                    )
        return sorted(found.values(), key=lambda s: (s.distance_m, s.id))[:limit]

    # -- shared by the async and the array paths
    def _fresh(self) -> _Fields | None:
        """The state, when its version was read within `recheck` (no store call)."""
        now = self._clock.now()
        with self._lock:
            if self._checked_at is not None and now - self._checked_at < self._recheck:
                return self._state
        return None

    def _known_latest(
        self, state: _Fields, hours: Collection[datetime]
    ) -> dict[datetime, dict[Pollutant, HourObservations]] | None:
        """Each hour's latest observations when all were read already (no store call)."""
        with self._lock:
            if all(hour in state.latest for hour in hours):
                return {hour: state.latest[hour] for hour in hours}
        return None

    def _current(self) -> _Fields:
        """The state for the store's current observations (read at most once per recheck)."""
        now = self._clock.now()
        fresh = self._fresh()
        if fresh is not None:
            return fresh
        version = self._store.observations_version()
        with self._lock:
            self._checked_at = now
            if version != self._state.version:
                self._state = _Fields(version)
            return self._state

    def _latest_for(
        self, state: _Fields, hours: Collection[datetime]
    ) -> dict[datetime, dict[Pollutant, HourObservations]]:
        """Each wanted hour's latest observations per pollutant (one read for the missing)."""
        with self._lock:
            known = {hour: state.latest[hour] for hour in hours if hour in state.latest}
            stations = state.stations
        missing = [hour for hour in hours if hour not in known]
        if not missing:
            return known
        if stations is None:
            stations = {station.id: station for station in self._store.list_stations()}
        rows = self._store.observations_between(
            min(missing) - MAX_LEAD, max(missing), tuple(self._parameters)
        )
        found = {hour: latest_hours(rows, hour) for hour in missing}
        with self._lock:
            state.stations = stations
            state.latest.update(found)
            while len(state.latest) > _HOURS_KEPT:
                state.latest.popitem(last=False)
        for by_pollutant in found.values():
            for pollutant in self._parameters:
                self._metrics.air_hour(pollutant.value, fused=pollutant in by_pollutant)
        self._say_if_fused(any(found.values()))
        return known | found

    def _wanted(
        self, state: _Fields, latest: Iterable[dict[Pollutant, HourObservations]]
    ) -> dict[tuple[Pollutant, datetime], list[tuple[Station, float]]]:
        """The (pollutant, hour) fields not yet computed, with their stations and values.
        An observation of a station written after the stations were read waits for the next
        version (the write changed it)."""
        wanted: dict[tuple[Pollutant, datetime], list[tuple[Station, float]]] = {}
        with self._lock:
            stations = state.stations or {}
            for by_pollutant in latest:
                for pollutant, hour in by_pollutant.items():
                    key = (pollutant, hour.hour_end)
                    if key in state.fields or key in wanted:
                        continue
                    wanted[key] = [
                        (stations[o.station_id], o.value)
                        for o in hour.observations
                        if o.station_id in stations
                    ]
        return wanted

    def _store_fields(
        self,
        state: _Fields,
        wanted: dict[tuple[Pollutant, datetime], list[tuple[Station, float]]],
        unfused: dict[Pollutant, list[float | None]],
    ) -> None:
        """Compute each wanted field from the unfused air at its stations (`unfused` holds
        them in the order of `wanted`, concatenated)."""
        offset = 0
        computed: dict[tuple[Pollutant, datetime], ResidualField | None] = {}
        for (pollutant, hour_end), observed in wanted.items():
            at_stations = unfused[pollutant][offset : offset + len(observed)]
            offset += len(observed)
            kept = [
                (station, value - background)
                for (station, value), background in zip(observed, at_stations, strict=True)
                if background is not None
            ]
            computed[(pollutant, hour_end)] = (
                residual_field(
                    [station for station, _ in kept],
                    [residual for _, residual in kept],
                    self._parameters[pollutant],
                    hour_end,
                )
                if kept
                else None
            )
        with self._lock:
            state.fields.update(computed)
            while len(state.fields) > _FIELDS_KEPT:
                state.fields.popitem(last=False)

    def _say_if_fused(self, fused: bool) -> None:
        """Log when fusion starts or stops having observations, once per change (the first
        hour without any is not worth a warning when there never were)."""
        with self._lock:
            before, self._fused_before = self._fused_before, fused
        if fused == before or (before is None and not fused):
            return
        if fused:
            log.info("air is fused with station observations")
        else:
            log.warning(
                "no station observations within %d h: air is the unfused background",
                MAX_LEAD // HOUR,
            )

    def _corrected(
        self,
        state: _Fields,
        samples: Sequence[Sample],
        answers: list[Concentrations],
        latest: dict[datetime, dict[Pollutant, HourObservations]],
    ) -> list[Concentrations]:
        import numpy as np

        with self._lock:
            fields = dict(state.fields)
        corrections: dict[Pollutant, FloatArray] = {}
        by_field: dict[tuple[Pollutant, datetime], list[int]] = {}
        for index, sample in enumerate(samples):
            for pollutant, hour in latest[observation_hour(sample.at)].items():
                by_field.setdefault((pollutant, hour.hour_end), []).append(index)
        for (pollutant, hour_end), indices in by_field.items():
            field = fields.get((pollutant, hour_end))
            if field is None:
                continue
            lats = np.array([samples[i].point.lat for i in indices], dtype=np.float64)
            lons = np.array([samples[i].point.lon for i in indices], dtype=np.float64)
            params = self._parameters[pollutant]
            fade = np.array([persistence(params, samples[i].at - hour_end) for i in indices])
            column = corrections.setdefault(pollutant, np.zeros(len(samples)))
            column[indices] += field.at(lats, lons) * fade
        if not corrections:
            return answers
        fused: list[Concentrations] = []
        for index, air in enumerate(answers):
            result = dict(air)
            for pollutant, column in corrections.items():
                value = result.get(pollutant)
                if value is not None:
                    result[pollutant] = max(0.0, value + float(column[index]))
            pm25, pm10 = result.get(Pollutant.PM25), result.get(Pollutant.PM10)
            if pm25 is not None and pm10 is not None:
                result[Pollutant.PM10] = max(pm10, pm25)  # PM10 contains PM2.5
            fused.append(result)
        return fused


def _columns(airs: Sequence[Concentrations]) -> dict[Pollutant, list[float | None]]:
    return {pollutant: [air.get(pollutant) for air in airs] for pollutant in SCORED}


class GriddedFusedAir(FusedAir):
    """`FusedAir` over a source that computes its values (`GriddedAir`): it answers many
    points at one time as one array too, off the event loop (a plan's node air)."""

    @property
    def _gridded(self) -> GriddedAir:
        unfused = self.unfused
        if not isinstance(unfused, GriddedAir):  # `fused_air` never builds one so
            raise TypeError("GriddedFusedAir needs a source that computes its values")
        return unfused

    def air_at_hour(self, lats: FloatArray, lons: FloatArray, hour: datetime) -> FloatArray:
        """See `GriddedAir.air_at_hour`: the unfused array, corrected (the values
        `concentrations` gives). Reads the store: call it off the event loop."""
        import numpy as np

        from cleanair_core.air.fusion import apply_residuals

        lat = np.asarray(lats, dtype=np.float64).reshape(-1)
        lon = np.asarray(lons, dtype=np.float64).reshape(-1)
        air = self._gridded.air_at_hour(lat, lon, hour)
        state = self._current()
        wanted_hour = observation_hour(hour)
        latest = self._latest_for(state, [wanted_hour])
        wanted = self._wanted(state, latest.values())
        if wanted:
            unfused: dict[Pollutant, list[float | None]] = {p: [] for p in SCORED}
            for (_, hour_end), observed in wanted.items():
                at_stations = self._gridded.air_at_hour(
                    np.array([station.point.lat for station, _ in observed]),
                    np.array([station.point.lon for station, _ in observed]),
                    hour_end - HOUR / 2,
                )
                for column, pollutant in enumerate(SCORED):
                    unfused[pollutant].extend(
                        None if np.isnan(v) else float(v) for v in at_stations[:, column]
                    )
            self._store_fields(state, wanted, unfused)
        with self._lock:
            fields = dict(state.fields)
        corrections: dict[Pollutant, FloatArray] = {}
        for pollutant, used in latest[wanted_hour].items():
            field = fields.get((pollutant, used.hour_end))
            if field is not None:
                fade = persistence(self._parameters[pollutant], hour - used.hour_end)
                corrections[pollutant] = field.at(lat, lon) * fade
        return apply_residuals(air, corrections) if corrections else air


def fused_air(
    unfused: AirQualitySource,
    observations: ObservationStore,
    *,
    store_calls: Offload = inline,
    clock: Clock | None = None,
    metrics: Metrics = NO_METRICS,
) -> FusedAir:
    """`unfused` corrected by `observations`: gridded (array answers) when `unfused`
    computes its values, else sample by sample. `metrics` hears of every hour worked out,
    fused or not."""
    kind = GriddedFusedAir if isinstance(unfused, GriddedAir) else FusedAir
    return kind(unfused, observations, store_calls=store_calls, clock=clock, metrics=metrics)


def unfused_of(source: AirQualitySource) -> AirQualitySource:
    """The source under any fusion: what the service would say with no observations."""
    return source.unfused if isinstance(source, FusedAir) else source
