"""`FusedAir` over a source that computes its values (`GriddedAir`): many points at one time
answered as one array (a plan's node air, a tile), and `fused_air`, which picks the kind a
source needs. The fusion itself, and the sample-by-sample path, are `cleanair_core.air.fused_air`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from cleanair_core.air.fused_air import FusedAir, _Fields
from cleanair_core.air.fusion import (
    HOUR,
    ResidualField,
    observation_hour,
    persistence,
)
from cleanair_core.air.observations import ObservationStore, Station
from cleanair_core.air.pollutants import SCORED, Concentrations, Pollutant
from cleanair_core.air.quality_source import (
    AirQualitySource,
    GriddedAir,
    Sample,
)
from cleanair_core.clock import Clock
from cleanair_core.metrics import NO_METRICS, Metrics
from cleanair_core.offload import Offload, inline

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    BoolArray = npt.NDArray[np.bool_]


class GriddedFusedAir(FusedAir):
    """`FusedAir` over a source that computes its values (`GriddedAir`): it answers many
    points at one time as one array too, off the event loop (a plan's node air)."""

    @property
    def _gridded(self) -> GriddedAir:
        unfused = self.unfused
        if not isinstance(unfused, GriddedAir):  # `fused_air` never builds one so
            raise TypeError("GriddedFusedAir needs a source that computes its values")
        return unfused

    def _fit_gridded(
        self,
        state: _Fields,
        wanted: dict[tuple[Pollutant, datetime], list[tuple[Station, float]]],
    ) -> None:
        """`_fit_for` on the array path (off the loop already): the fits' backgrounds as
        arrays, an hour at a time."""
        import numpy as np

        keys = self._unfitted(state, wanted)
        if not keys:
            return
        layouts = self._fit_layouts(state, keys, self._fit_rows(keys))
        backgrounds: dict[tuple[Pollutant, datetime], FloatArray] = {}
        for key, layout in layouts.items():
            if layout is None:
                continue
            lats = np.array([s.point.lat for s in layout.stations], dtype=np.float64)
            lons = np.array([s.point.lon for s in layout.stations], dtype=np.float64)
            column = SCORED.index(key[0])
            backgrounds[key] = np.stack(
                [
                    self._gridded.air_at_hour(lats, lons, h - HOUR / 2)[:, column]
                    for h in layout.hours
                ]
            )
        self._keep_fits(state, layouts, backgrounds)

    def _at_middle(
        self,
        field: ResidualField,
        lat: FloatArray,
        lon: FloatArray,
        hour: datetime,
        air: FloatArray,
        middles: dict[tuple[datetime, bytes], FloatArray],
        reaches: dict[tuple[tuple[str, ...], float], BoolArray],
    ) -> FloatArray | None:
        """The unfused values (a column per `SCORED` pollutant) at the middle of `field`'s
        hour where it reaches (NaN elsewhere: no pattern there), computed once per middle
        and set of points reached; None where the field keeps all of the pattern. Which
        points a set of stations reaches is worked out once (the pollutants' fields mostly
        share their stations, and a network has up to millions of points)."""
        import numpy as np

        if field.params.background_share == 1.0:
            return None
        if hour == field.middle:
            return air
        reach_key = (field.stations, field.params.support_m)
        if reach_key not in reaches:
            reaches[reach_key] = field.reaches(lat, lon)
        reached = reaches[reach_key]
        key = (field.middle, reached.tobytes())
        if key not in middles:
            values = np.full((lat.size, len(SCORED)), np.nan)
            if reached.any():
                values[reached] = self._gridded.air_at_hour(
                    lat[reached], lon[reached], field.middle
                )
            middles[key] = values
        return middles[key]

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
        computed: dict[tuple[Pollutant, datetime], ResidualField | None] = {}
        if wanted:
            self._fit_gridded(state, wanted)
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
            computed = self._store_fields(state, wanted, unfused)
        with self._lock:
            fields = dict(state.fields)
        fields.update(computed)
        corrections: dict[Pollutant, FloatArray] = {}
        middles: dict[tuple[datetime, bytes], FloatArray] = {}
        reaches: dict[tuple[tuple[str, ...], float], BoolArray] = {}
        for pollutant, used in latest[wanted_hour].items():
            field = fields.get((pollutant, used.hour_end))
            if field is not None:
                fade = persistence(field.params, hour - used.hour_end)
                middle = self._at_middle(field, lat, lon, hour, air, middles, reaches)
                backgrounds = None if middle is None else middle[:, SCORED.index(pollutant)]
                corrections[pollutant] = field.at(lat, lon, backgrounds) * fade
        return apply_residuals(air, corrections) if corrections else air

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        """See `FusedAir.concentrations`; when no station observation is known for any of
        the samples' hours (and the observations' version was read within the recheck), the
        unfused answers as they are, which is what the fusion would give them, without
        building its fields, pattern and corrections (a served score on a deployment without
        stations: a third of its air's time)."""
        answers = await self.unfused.concentrations(samples)
        if not samples:
            return answers
        state = self._fresh()
        if state is not None and self._nothing_known(
            state, {observation_hour(s.at) for s in samples}
        ):
            return answers
        return (await self._fused(samples, answers))[0]

    def _nothing_known(self, state: _Fields, hours: Collection[datetime]) -> bool:
        """Whether every hour's latest observations were read already and none holds any:
        `_known_latest` found them all and each is empty, without building its dict."""
        with self._lock:
            latest = state.latest
            return all(hour in latest and not latest[hour] for hour in hours)

    async def ready_at_times(self, timestamps: FloatArray) -> None:
        """Read what `air_at_times` needs for samples at `timestamps` and does not hold (the
        observations' version once per recheck, the hours' latest observations), off the
        event loop as `concentrations` reads them: a plan's enrichment asks this first."""
        fresh = self._fresh()
        state = fresh if fresh is not None else await self._store_calls(self._current)
        hours = _observation_hours(timestamps)
        if hours is not None and self._known_latest(state, hours) is None:
            await self._cpu_calls(lambda: self._latest_for(state, hours))

    def air_at_times(
        self, lats: FloatArray, lons: FloatArray, timestamps: FloatArray
    ) -> FloatArray | None:
        """See `AirAtTimes`: the unfused rows when no station observation is known for any
        of the samples' hours (the fusion leaves such samples as they are: what
        `concentrations` gives); None otherwise, or when the observations are due to be read
        again or the unfused source cannot answer so (ask `concentrations`)."""
        inner = getattr(self._gridded, "air_at_times", None)
        state = self._fresh()
        if inner is None or state is None:
            return None
        hours = _observation_hours(timestamps)
        if hours is None:
            return None
        known = self._known_latest(state, hours)
        if known is None or any(known.values()):
            return None
        rows: FloatArray | None = inner(lats, lons, timestamps)
        return rows


def _observation_hours(timestamps: FloatArray) -> set[datetime] | None:
    """`observation_hour` of each instant (POSIX seconds), from whole microseconds, each
    hour once; None beyond the years a float holds whole microseconds of."""
    import numpy as np

    from cleanair_core.air.fusion import HOUR

    if timestamps.size == 0 or float(np.abs(timestamps).max()) > _EXACT_SECONDS:
        return None
    micros = np.rint(np.asarray(timestamps, dtype=np.float64) * 1e6).astype(np.int64)
    per_hour = 3_600_000_000
    ends = np.unique(-(-micros // per_hour)).tolist()
    return {_EPOCH + HOUR * end for end in ends}


#: Below 2^32 seconds (the year 2106) a float of POSIX seconds times 10^6 is within half a
#: microsecond of its whole microseconds (half an ulp of each, 0.24 + 0.25): `rint` finds them.
_EXACT_SECONDS = 2.0**32
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def fused_air(
    unfused: AirQualitySource,
    observations: ObservationStore,
    *,
    store_calls: Offload = inline,
    cpu_calls: Offload = inline,
    clock: Clock | None = None,
    metrics: Metrics = NO_METRICS,
) -> FusedAir:
    """`unfused` corrected by `observations`: gridded (array answers) when `unfused`
    computes its values, else sample by sample. `metrics` hears of every hour worked out,
    fused or not."""
    kind = GriddedFusedAir if isinstance(unfused, GriddedAir) else FusedAir
    return kind(
        unfused,
        observations,
        store_calls=store_calls,
        cpu_calls=cpu_calls,
        clock=clock,
        metrics=metrics,
    )
