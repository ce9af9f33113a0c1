"""The fused air-quality source: any source (street level included) corrected by the stored
station observations, so every endpoint, the planner and an embedder get the same fused air.

The rule is `cleanair_core.air.fusion`; this module feeds it. For a sample at instant t it
uses, per pollutant, the latest hour of observations ending at or before the hour of t (within
`MAX_LEAD`), and the correction fades with the lead from that hour. Observations are read
through the `ObservationStore` port and what is computed from them is kept until the store's
`observations_version` changes (checked at most once per `recheck`), so a running server
fuses newly imported observations within a second, without a restart. With no observations
the answer is exactly the unfused source's.

The fusion's parameters are fitted per pollutant and UTC day from the observations of the
`FIT_DAYS` ending with that day (`cleanair_core.air.fusion_fit`), once per version of the
observations, and fall back to `FUSION_PARAMETERS` where those are too few. `explain` tells,
for one point, each value's standard error and the stations that moved it.
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
    background_error,
    interval90,
    latest_hours_each,
    observation_hour,
    persistence,
    residual_field,
    uncertainty,
)
from cleanair_core.air.fusion_fit import FitLayout, fit_layout, fit_parameters
from cleanair_core.air.observations import Observation, ObservationStore, Station
from cleanair_core.air.pollutants import SCORED, Concentrations, Pollutant
from cleanair_core.air.quality_source import (
    AirQualitySource,
    Sample,
    answers_at_once,
)
from cleanair_core.air.screening import OWN_HOURS, RecentValues, in_line_hours, in_line_of
from cleanair_core.clock import Clock, SystemClock
from cleanair_core.geo import Point
from cleanair_core.metrics import NO_METRICS, Metrics
from cleanair_core.offload import Offload, inline

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    BoolArray = npt.NDArray[np.bool_]

log = logging.getLogger("cleanair.fusion")

#: Hours of fields kept per process (a plan, a forecast and a few scores need a handful),
#: and hours whose latest observations are kept: both are dropped oldest first.
_FIELDS_KEPT = 256
_HOURS_KEPT = 256


#: A station is reported as correcting a point when its weight there is at least this, and
#: a value as corrected when the correction moved it by more than `CORRECTED_SHARE` of it.
REPORTED_WEIGHT = 0.01
CORRECTED_SHARE = 0.001

#: Days of observations, ending with a UTC day, that fusion's parameters for that day are
#: fitted on.
FIT_DAYS = 7
#: Pollutant-days whose fitted parameters are kept per version of the observations.
_FITS_KEPT = 64


@attrs.frozen
class StationUsed:
    """A station whose observation corrects the air at a point: how far it is (metres), its
    weight there (its residual's share in the correction, after the fade into the forecast)
    and the end of the hour of its value used."""

    id: str
    name: str
    distance_m: float
    last_hour_end: datetime
    weight: float = 0.0


@attrs.frozen
class FusedValue:
    """One pollutant's value at a point, with how sure it is and where it comes from."""

    value: float
    #: The background's value there (what the service says with no observations).
    unfused: float
    standard_error: float
    #: The 90 % interval, never below zero.
    low: float
    high: float
    #: Whether the stations moved the value by more than `CORRECTED_SHARE` of it.
    corrected: bool
    #: The stations whose weight there is at least `REPORTED_WEIGHT`, heaviest first.
    stations: tuple[StationUsed, ...]
    #: Whether the fusion's parameters were fitted on this deployment's observations.
    fitted: bool


def background_values(air: Concentrations) -> dict[Pollutant, FusedValue]:
    """`FusedValue`s of values no station corrected: the background's own error."""
    values: dict[Pollutant, FusedValue] = {}
    for pollutant, value in air.items():
        if value is None:
            continue
        error = background_error(FUSION_PARAMETERS.get(pollutant), value)
        low, high = interval90(value, error)
        values[pollutant] = FusedValue(value, value, error, low, high, False, (), False)
    return values


def fit_day(hour_end: datetime) -> datetime:
    """The start (UTC midnight) of the day whose fitted parameters fuse the hour ending at
    `hour_end`."""
    start = hour_end - HOUR
    return start.replace(hour=0, minute=0, second=0, microsecond=0)


def fit_window(day: datetime) -> tuple[datetime, datetime]:
    """The first and last hour ends of the observations a day's parameters are fitted on:
    the `FIT_DAYS` ending with that day (those stored so far)."""
    return day - timedelta(days=FIT_DAYS - 1) + HOUR, day + timedelta(days=1)


@attrs.frozen
class _Used:
    """What one request's values were corrected with."""

    state: _Fields
    latest: dict[datetime, dict[Pollutant, HourObservations]]
    fields: dict[tuple[Pollutant, datetime], ResidualField | None]


class _Fields:
    """What has been computed from one version of the observations."""

    def __init__(self, version: int) -> None:
        self.version = version
        self.stations: dict[str, Station] | None = None
        self.latest: OrderedDict[datetime, dict[Pollutant, HourObservations]] = OrderedDict()
        self.fields: OrderedDict[tuple[Pollutant, datetime], ResidualField | None] = OrderedDict()
        #: Pollutant-hours whose out-of-line observations were counted already.
        self.set_aside: set[tuple[Pollutant, datetime]] = set()
        #: Per pollutant and day: the parameters, and whether the data fitted them.
        self.fits: OrderedDict[tuple[Pollutant, datetime], tuple[FusionParameters, bool]] = (
            OrderedDict()
        )


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
        cpu_calls: Offload = inline,
        clock: Clock | None = None,
        recheck: timedelta = timedelta(seconds=1),
        parameters: dict[Pollutant, FusionParameters] | None = None,
        metrics: Metrics = NO_METRICS,
    ) -> None:
        self.unfused = unfused
        self.update_interval = unfused.update_interval
        self._store = observations
        self._store_calls = store_calls
        self._cpu_calls = cpu_calls
        self._clock = clock or SystemClock()
        self._recheck = recheck
        #: Given parameters are used as they are; else they are fitted per day, these the
        #: fallback.
        self._fixed = parameters is not None
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
        return (await self._fused(samples, answers))[0]

    async def _fused(
        self, samples: Sequence[Sample], answers: list[Concentrations]
    ) -> tuple[list[Concentrations], _Used]:
        """`answers` (the unfused air of `samples`) corrected, and what corrected them: the
        one place values and their provenance both come from."""
        # The common case (the version read within the second, the hours' observations read
        # already) needs no store call, and so no trip off the event loop.
        fresh = self._fresh()
        state = fresh if fresh is not None else await self._store_calls(self._current)
        hours = {observation_hour(sample.at) for sample in samples}
        known = self._known_latest(state, hours)
        latest = (
            known
            if known is not None
            else await self._cpu_calls(lambda: self._latest_for(state, hours))
        )
        wanted = self._wanted(state, latest.values())
        # The fields kept already, before this request's new ones may push them out of the
        # state (a history needs more hours' fields than the state keeps).
        with self._lock:
            fields = dict(state.fields)
        computed: dict[tuple[Pollutant, datetime], ResidualField | None] = {}
        if wanted:
            await self._fit_for(state, wanted)
            points = [
                Sample(station.point, hour_end - HOUR / 2)
                for (_, hour_end), observed in wanted.items()
                for station, _ in observed
            ]
            airs = await self.unfused.concentrations(points)
            computed = await self._cpu_calls(
                lambda: self._store_fields(state, wanted, _columns(airs))
            )
        # This request's own fields, even where more were computed than the state keeps.
        fields.update(computed)
        wanted_pattern = self._pattern_samples(fields, samples, latest)
        pattern: dict[Sample, Concentrations] = {}
        if wanted_pattern:
            try:
                airs = await self.unfused.concentrations(wanted_pattern)
                pattern = dict(zip(wanted_pattern, airs, strict=True))
            except Exception:  # the pattern is a refinement: without it, none is judged
                log.warning("the background's pattern could not be read: it is kept whole")
        used = _Used(state, latest, fields)
        return self._corrected(fields, samples, answers, latest, pattern), used

    def _pattern_samples(
        self,
        fields: dict[tuple[Pollutant, datetime], ResidualField | None],
        samples: Sequence[Sample],
        latest: dict[datetime, dict[Pollutant, HourObservations]],
    ) -> list[Sample]:
        """The background at the middle of each field's hour, at the samples that a field
        keeping less than all of the background's pattern reaches: the pattern it judged
        (the background's change since is not a pattern)."""
        import numpy as np

        wanted: dict[Sample, None] = {}
        by_hour: dict[datetime, list[Sample]] = {}
        for sample in samples:
            by_hour.setdefault(observation_hour(sample.at), []).append(sample)
        for hour_of_samples, these in by_hour.items():
            # Built for the first field that needs them: without observations (or with fields
            # keeping all of the pattern) a score builds none.
            points: tuple[FloatArray, FloatArray] | None = None
            for pollutant, hour in latest[hour_of_samples].items():
                field = fields.get((pollutant, hour.hour_end))
                if field is None or field.params.background_share == 1.0:
                    continue
                if points is None:
                    points = (
                        np.array([s.point.lat for s in these]),
                        np.array([s.point.lon for s in these]),
                    )
                reached = field.reaches(*points)
                for sample, inside in zip(these, reached.tolist(), strict=True):
                    if inside and sample.at != field.middle:
                        wanted[Sample(sample.point, field.middle)] = None
        return list(wanted)

    async def explain(self, point: Point, at: datetime) -> dict[Pollutant, FusedValue]:
        """Each pollutant's value at `point` and `at` with its standard error, 90 % interval,
        whether the stations changed it, and the stations whose weight there is at least
        `REPORTED_WEIGHT` (with their weight, distance and hour)."""
        [explained] = await self.explain_hours(point, [at])
        return explained

    async def explain_hours(
        self, point: Point, ats: Sequence[datetime]
    ) -> list[dict[Pollutant, FusedValue]]:
        """`explain` at `point` for each instant of `ats`, from one correction of them all
        (a history's hours: one ask of the unfused source, each hour's fields computed once
        even where more hours are asked than the fields kept)."""
        samples = [Sample(point, at) for at in ats]
        if not samples:
            return []
        raws = await self.unfused.concentrations(samples)
        fused, corrected_with = await self._fused(samples, raws)
        with self._lock:
            stations = dict(corrected_with.state.stations or {})

        def explain_all() -> list[dict[Pollutant, FusedValue]]:
            return [
                self._explained(point, at, raw, air, corrected_with, stations)
                for at, raw, air in zip(ats, raws, fused, strict=True)
            ]

        # One hour's few array operations stay here; a history's hours go off the loop.
        return explain_all() if len(samples) == 1 else await self._cpu_calls(explain_all)

    def _explained(
        self,
        point: Point,
        at: datetime,
        raw: Concentrations,
        air: Concentrations,
        corrected_with: _Used,
        stations: dict[str, Station],
    ) -> dict[Pollutant, FusedValue]:
        """One instant's `explain`, from the values and fields its correction used."""
        import numpy as np

        state, fields = corrected_with.state, corrected_with.fields
        latest = corrected_with.latest.get(observation_hour(at), {})
        explained: dict[Pollutant, FusedValue] = {}
        for pollutant, value in air.items():
            unfused = raw.get(pollutant)
            if value is None or unfused is None:
                continue
            hour = latest.get(pollutant)
            field = fields.get((pollutant, hour.hour_end)) if hour is not None else None
            if field is None:
                fitted = False
                error = background_error(self._parameters.get(pollutant), value)
                used: tuple[StationUsed, ...] = ()
            else:
                params, fitted = field.params, self._fitted(state, pollutant, field.hour_end)
                fade = persistence(params, at - field.hour_end)
                lat, lon = np.array([point.lat]), np.array([point.lon])
                weights = field.weights(lat, lon)[0] * fade
                left = field.unexplained(lat, lon)
                error = float(uncertainty(params, np.array([value]), left, np.array([fade]))[0])
                used = _reported(field, weights, point, stations)
            low, high = interval90(value, error)
            explained[pollutant] = FusedValue(
                value=value,
                unfused=unfused,
                standard_error=error,
                low=low,
                high=high,
                corrected=abs(value - unfused) > CORRECTED_SHARE * abs(unfused),
                stations=used,
                fitted=fitted,
            )
        return explained

    def answers_at_once(self, samples: Sequence[Sample]) -> bool:
        """See `CachingAir`: the unfused air at once, the hours' fields computed already (a
        field not yet computed asks the unfused air at its stations), and the background at
        the middle of their hours where a field judges its pattern."""
        if not answers_at_once(self.unfused, samples):
            return False
        state = self._fresh()
        if state is None:  # the observations are due to be read: new ones need new fields
            return False
        known = self._known_latest(state, {observation_hour(sample.at) for sample in samples})
        if known is None or self._wanted(state, known.values()):
            return False
        with self._lock:
            fields = dict(state.fields)
        pattern = self._pattern_samples(fields, samples, known)
        return not pattern or answers_at_once(self.unfused, pattern)

    def parameters_at(self, pollutant: Pollutant, at: datetime) -> FusionParameters:
        """The parameters a sample of `pollutant` at `at` is fused with, as last computed
        (the fallback before any fit)."""
        with self._lock:
            state = self._state
            hour = state.latest.get(observation_hour(at), {}).get(pollutant)
        if hour is None:
            return self._parameters[pollutant]
        return self._params_for(state, pollutant, hour.hour_end)

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
        # The hours a correction may be made from, and the day before the earliest of them:
        # what the out-of-line screen compares each reading with.
        rows = self._store.observations_between(
            min(missing) - MAX_LEAD - timedelta(hours=OWN_HOURS),
            max(missing),
            tuple(self._parameters),
        )
        found = latest_hours_each(rows, missing)
        self._set_aside_out_of_line(state, found, rows, stations)
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

    def _set_aside_out_of_line(
        self,
        state: _Fields,
        found: dict[datetime, dict[Pollutant, HourObservations]],
        rows: Sequence[Observation],
        stations: dict[str, Station],
    ) -> None:
        """Drop from each hour's observations those wildly out of line with their
        neighbours and their own last day (`screening.in_line`): counted and logged once per
        pollutant-hour and version, never fused."""
        screened: dict[tuple[Pollutant, datetime], HourObservations] = {}
        recent = RecentValues(rows)
        for by_pollutant in found.values():
            for pollutant, hour in list(by_pollutant.items()):
                key = (pollutant, hour.hour_end)
                if key not in screened:
                    kept = in_line_of(hour.observations, recent, stations)
                    screened[key] = attrs.evolve(hour, observations=kept)
                    aside = len(hour.observations) - len(kept)
                    with self._lock:
                        counted = key in state.set_aside
                        state.set_aside.add(key)
                    if aside and not counted:
                        self._metrics.observations_set_aside(pollutant.value, aside)
                        log.warning(
                            "observations set aside: out of line with their neighbours and "
                            "their own last day",
                            extra={
                                "pollutant": pollutant.value,
                                "hour_end": hour.hour_end.isoformat(),
                                "count": aside,
                            },
                        )
                by_pollutant[pollutant] = screened[key]

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
    ) -> dict[tuple[Pollutant, datetime], ResidualField | None]:
        """Compute each wanted field from the unfused air at its stations (`unfused` holds
        them in the order of `wanted`, concatenated); returns them (the state keeps the
        latest `_FIELDS_KEPT`)."""
        offset = 0
        computed: dict[tuple[Pollutant, datetime], ResidualField | None] = {}
        for (pollutant, hour_end), observed in wanted.items():
            at_stations = unfused[pollutant][offset : offset + len(observed)]
            offset += len(observed)
            kept = [
                (station, value, background)
                for (station, value), background in zip(observed, at_stations, strict=True)
                if background is not None
            ]
            computed[(pollutant, hour_end)] = (
                residual_field(
                    [station for station, _, _ in kept],
                    [value - background for _, value, background in kept],
                    self._params_for(state, pollutant, hour_end),
                    hour_end,
                    [background for _, _, background in kept],
                )
                if kept
                else None
            )
        with self._lock:
            state.fields.update(computed)
            while len(state.fields) > _FIELDS_KEPT:
                state.fields.popitem(last=False)
        return computed

    # -- fusion's parameters, fitted per pollutant and day
    def _params_for(
        self, state: _Fields, pollutant: Pollutant, hour_end: datetime
    ) -> FusionParameters:
        """The parameters that fuse `pollutant`'s hour ending at `hour_end`: fitted for its
        day when that was done, else the fallback."""
        if not self._fixed:
            with self._lock:
                fit = state.fits.get((pollutant, fit_day(hour_end)))
            if fit is not None:
                return fit[0]
        return self._parameters[pollutant]

    def _fitted(self, state: _Fields, pollutant: Pollutant, hour_end: datetime) -> bool:
        with self._lock:
            fit = state.fits.get((pollutant, fit_day(hour_end)))
        return fit is not None and fit[1]

    def _unfitted(
        self, state: _Fields, wanted: Iterable[tuple[Pollutant, datetime]]
    ) -> list[tuple[Pollutant, datetime]]:
        """The (pollutant, day) fits the wanted fields need and this version lacks."""
        if self._fixed:
            return []
        with self._lock:
            days = {(pollutant, fit_day(hour_end)) for pollutant, hour_end in wanted}
            return sorted(key for key in days if key not in state.fits)

    def _fit_rows(self, keys: Sequence[tuple[Pollutant, datetime]]) -> list[Observation]:
        """The observations the days' fits are made on: the `FIT_DAYS` ending with each, and
        the day before them (the out-of-line screen's history). One read for all the days
        (their windows overlap: a history's days share six of their seven)."""
        days = sorted({day for _, day in keys})
        earliest, _ = fit_window(days[0])
        _, latest = fit_window(days[-1])
        return self._store.observations_between(
            earliest - timedelta(hours=OWN_HOURS), latest, tuple({p: None for p, _ in keys})
        )

    def _fit_layouts(
        self,
        state: _Fields,
        keys: Sequence[tuple[Pollutant, datetime]],
        rows: Sequence[Observation],
    ) -> dict[tuple[Pollutant, datetime], FitLayout | None]:
        """What each fit is made on: its days' observations without those out of line with
        their neighbours and their own last day (as fusion sets them aside), laid out. Each
        pollutant's hours are screened once for all its days (an hour is judged by its own
        hour and the day before it, which `rows` holds for every hour of every window)."""
        with self._lock:
            stations = dict(state.stations or {})
        screened = {
            pollutant: in_line_hours(rows, stations, pollutant)
            for pollutant in dict.fromkeys(p for p, _ in keys)
        }
        layouts: dict[tuple[Pollutant, datetime], FitLayout | None] = {}
        for pollutant, day in keys:
            first, last = fit_window(day)
            kept = [o for o in screened[pollutant] if first <= o.hour_end <= last]
            layouts[(pollutant, day)] = fit_layout(kept, stations, pollutant)
        return layouts

    def _keep_fits(
        self,
        state: _Fields,
        layouts: dict[tuple[Pollutant, datetime], FitLayout | None],
        backgrounds: dict[tuple[Pollutant, datetime], FloatArray],
    ) -> None:
        """Fit each pollutant-day with a layout (CPU work: off the event loop) and keep it;
        one without keeps the fallback, marked as not fitted."""
        fits: dict[tuple[Pollutant, datetime], tuple[FusionParameters, bool]] = {}
        for key, layout in layouts.items():
            fallback = self._parameters[key[0]]
            if layout is None or key not in backgrounds:
                fits[key] = (fallback, False)
                continue
            fit = fit_parameters(layout.stations, layout.observed, backgrounds[key], fallback)
            fits[key] = (fit.parameters, fit.fitted)
            log.info(
                "fusion fitted",
                extra={
                    "pollutant": key[0].value,
                    "day": key[1].date().isoformat(),
                    "fitted": fit.fitted,
                    "stations": fit.stations,
                    "hours": fit.hours,
                },
            )
        with self._lock:
            state.fits.update(fits)
            while len(state.fits) > _FITS_KEPT:
                state.fits.popitem(last=False)

    async def _fit_for(
        self,
        state: _Fields,
        wanted: dict[tuple[Pollutant, datetime], list[tuple[Station, float]]],
    ) -> None:
        """Fit the pollutant-days the wanted fields need (store reads and the fit off the
        loop, the background at the fit's stations asked of the unfused source)."""
        import numpy as np

        keys = self._unfitted(state, wanted)
        if not keys:
            return
        rows = await self._store_calls(lambda: self._fit_rows(keys))
        layouts = await self._cpu_calls(lambda: self._fit_layouts(state, keys, rows))
        samples_of = {
            key: [Sample(s.point, h - HOUR / 2) for h in layout.hours for s in layout.stations]
            for key, layout in layouts.items()
            if layout is not None
        }
        # The background at each station and hour once, whichever pollutants and days need
        # it (a day's pollutants share their stations' hours, and a history's days most of
        # their windows): one ask of the unfused source.
        unique = list(dict.fromkeys(s for samples in samples_of.values() for s in samples))
        backgrounds: dict[tuple[Pollutant, datetime], FloatArray] = {}
        try:
            airs = await self.unfused.concentrations(unique) if unique else []
        except Exception:  # a fit is a refinement: the fallback fuses meanwhile
            log.warning(
                "fusion could not be fitted: the background was unavailable",
                extra={
                    "pollutants": sorted({key[0].value for key in samples_of}),
                    "days": sorted({key[1].date().isoformat() for key in samples_of}),
                },
            )
        else:
            at = dict(zip(unique, airs, strict=True))
            for key, layout in layouts.items():
                if layout is None:
                    continue
                samples = samples_of[key]
                values = np.array([_or_nan(at[s].get(key[0])) for s in samples], dtype=np.float64)
                backgrounds[key] = values.reshape(len(layout.hours), len(layout.stations))
        await self._cpu_calls(lambda: self._keep_fits(state, layouts, backgrounds))

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
        fields: dict[tuple[Pollutant, datetime], ResidualField | None],
        samples: Sequence[Sample],
        answers: list[Concentrations],
        latest: dict[datetime, dict[Pollutant, HourObservations]],
        pattern: dict[Sample, Concentrations],
    ) -> list[Concentrations]:
        import numpy as np

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
            at_middle = [
                answers[i]
                if samples[i].at == field.middle
                else pattern.get(Sample(samples[i].point, field.middle), {})
                for i in indices
            ]
            backgrounds = np.array(
                [_or_nan(air.get(pollutant)) for air in at_middle], dtype=np.float64
            )
            fade = np.array([persistence(field.params, samples[i].at - hour_end) for i in indices])
            column = corrections.setdefault(pollutant, np.zeros(len(samples)))
            column[indices] += field.at(lats, lons, backgrounds) * fade
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


def _or_nan(value: float | None) -> float:
    return float("nan") if value is None else value


def _reported(
    field: ResidualField, weights: FloatArray, point: Point, stations: dict[str, Station]
) -> tuple[StationUsed, ...]:
    """The field's stations whose |weight| at `point` is at least `REPORTED_WEIGHT`,
    heaviest first."""
    import numpy as np

    from cleanair_core.air.fusion import station_distances

    distances = station_distances(
        np.array([point.lat]), np.array([point.lon]), field.lats, field.lons
    )[0]
    found = [
        StationUsed(
            station_id,
            stations[station_id].name if station_id in stations else station_id,
            float(distance),
            field.hour_end,
            float(weight),
        )
        for station_id, distance, weight in zip(
            field.stations, distances.tolist(), weights.tolist(), strict=True
        )
        if abs(weight) >= REPORTED_WEIGHT
    ]
    return tuple(sorted(found, key=lambda s: (-abs(s.weight), s.distance_m, s.id)))


def _columns(airs: Sequence[Concentrations]) -> dict[Pollutant, list[float | None]]:
    return {pollutant: [air.get(pollutant) for air in airs] for pollutant in SCORED}


def unfused_of(source: AirQualitySource) -> AirQualitySource:
    """The source under any fusion: what the service would say with no observations."""
    return source.unfused if isinstance(source, FusedAir) else source
