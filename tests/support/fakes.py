"""Small fakes of the outside-world ports, with observable state."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cleanair_core.air.places import Place
from cleanair_core.air.pollutants import Concentrations, Pollutant
from cleanair_core.air.quality_source import Sample
from cleanair_core.air.wifi import WifiAccessPoint
from cleanair_core.errors import SourceUnavailable
from cleanair_core.geo import Point

HELSINKI = Point(60.17, 24.94)
AIR: Concentrations = {
    Pollutant.PM25: 7.0,
    Pollutant.NO2: 18.0,
    Pollutant.O3: 50.0,
    Pollutant.PM10: None,
}
#: The address FakeIp places in Finland; every other address has no country.
FINNISH_ADDRESS = "81.0.0.1"


class FakeSource:
    """Answers the same air for every sample (or per-sample air from `by_sample`), or fails;
    records what it was asked."""

    def __init__(
        self,
        air: Concentrations | None = None,
        *,
        fail: bool = False,
        update_interval: int = 3600,
        by_sample: Callable[[int, Sample], Concentrations] | None = None,
    ) -> None:
        self.air = AIR if air is None else air
        self.fail = fail
        self.update_interval = update_interval
        self.by_sample = by_sample
        self.samples: list[Sample] = []
        #: What a failing source raises (a fresh `SourceUnavailable()` when None).
        self.error: SourceUnavailable | None = None

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        self.samples.extend(samples)
        if self.fail:
            raise self.error or SourceUnavailable()
        if self.by_sample is not None:
            return [self.by_sample(i, sample) for i, sample in enumerate(samples)]
        return [dict(self.air) for _ in samples]


class FakeGeolocator:
    def __init__(self, answer: Point | None, *, fail: bool = False) -> None:
        self.answer = answer
        self.fail = fail
        self.calls = 0

    async def locate(self, scan: Sequence[WifiAccessPoint]) -> Point | None:
        self.calls += 1
        if self.fail:
            raise SourceUnavailable()
        return self.answer


class FakeIp:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def locate(self, address: str) -> Place | None:
        self.asked.append(address)
        return Place("Finland", HELSINKI) if address == FINNISH_ADDRESS else None


class FakeNamer:
    def name_of(self, point: Point) -> str:
        return "Helsinki, Finland"

    def country_of(self, point: Point) -> str | None:
        return "FI"
