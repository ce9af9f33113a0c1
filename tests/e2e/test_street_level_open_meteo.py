"""End to end: real CAMS-like data (one value per grid cell) downscaled to street level.

A real `cleanair serve` over a fake Open-Meteo on loopback that answers the same values for
every CAMS cell, with the shipped central-Helsinki network, all of it inside one CAMS Europe
cell: points of that cell get different air, forecasts and scores where the traffic differs,
and walks along busy roads find cleaner routes on quieter streets beside them.
Forecasts and plans look at 10:00 UTC today (midday in Helsinki): traffic, and so the
street-level contrast, is much smaller at night. A score is always for the current hour. One
plan starts at 10:45 and crosses the hour: its doses are the enrichment endpoint's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from cleanair_core.geo import Point
from cleanair_core.routes.enrichment import MAX_WAYPOINTS
from cleanair_core.routes.times import estimated_times
from cleanair_sources.open_meteo import snap
from support.fake_open_meteo import FakeOpenMeteo
from support.servers import pair, poll_until_finished, running_server, server_env

pytestmark = pytest.mark.e2e

#: The kerb of Mannerheimintie, the city's main artery, and Kaisaniemi park, 600 m east.
KERB = Point(60.1718, 24.9368)
PARK = Point(60.1740, 24.9470)
#: The network's busiest kerb, where Mannerheimintie meets Pohjoisesplanadi and
#: Lönnrotinkatu, and a quiet block 200 m north-east of it, on Aleksanterinkatu among the
#: pedestrian streets. The score is for the current hour, which a test cannot choose: the
#: model puts theirs 4 to 29 apart at every hour of the day (and across an hour's turn).
BUSY_KERB = Point(60.16753, 24.94197)
QUIET_BLOCK = Point(60.16891, 24.94429)
#: Walks whose shortest route follows busy roads, each with a quieter way beside them no more
#: than 25 % longer. The model cuts their dose by 5-7 % at midday; from starts and ends moved
#: by about 20 m, 22 of 24 plans still cut it by more than the 3 % threshold. (Of random walks
#: in the network only a minority find a cleaner route, and fewer along busy roads, where a
#: quieter way within 25 % is rarer: these are chosen, not typical. Kiasma to Kluuvi, once
#: among them, cut its dose by less than 3 % once quiet streets kept the cell's value, see
#: docs/science.md "Street-level air".)
WALKS = {
    # Mannerheimintie from Erottaja to Kiasma; or the Kamppi footways and Yrjönkäytävä.
    "Mannerheimintie north": (Point(60.16655, 24.94045), Point(60.17142, 24.93628)),
    # Pohjoisesplanadi and Mannerheimintie to Töölönlahti; or Fabianinkatu and Kaivokatu.
    "Esplanadi to Töölönlahti": (Point(60.16783, 24.94946), Point(60.17286, 24.93783)),
}
#: From Esplanadi to Kaisaniemi's edge: 1.4 km, about 18 minutes' walk, with cleaner ways.
ACROSS_THE_HOUR = (Point(60.16783, 24.94946), Point(60.1745, 24.9370))
#: A plan is 25 credits, a forecast 2, a score 1, an enrichment 1 a waypoint: the routes of
#: the plan across the hour, enriched, take several hundred.
CREDITS = 2000
#: How long a plan may take here (several run one after another on a shared machine).
POLL_FOR = 90.0
#: From docs/routing.md: an alternative is at most 25 % longer and cuts the dose by >= 3 %.
MAX_DETOUR = 0.25
MATERIAL_REDUCTION_PCT = 3.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """A server in Open-Meteo mode with the default network, and a paired user's headers."""
    tmp_path = tmp_path_factory.mktemp("street_level")
    with FakeOpenMeteo().running() as upstream:
        env = server_env(
            tmp_path,
            CLEANAIR_AIR_QUALITY_SOURCE="open-meteo",
            CLEANAIR_OPEN_METEO_URL=upstream.url,
            CLEANAIR_DEFAULT_NETWORK="true",
            CLEANAIR_PLAN_WORKERS="1",
            CLEANAIR_MONTHLY_CREDITS=str(CREDITS),
            CLEANAIR_DAILY_CREDITS=str(CREDITS),
        )
        with running_server(env, tmp_path / "server.log") as running:
            yield running.base, pair(env, running.base)


def midday() -> datetime:
    return datetime.now(UTC).replace(hour=10, minute=0, second=0, microsecond=0)


def test_one_cams_cell_gets_street_level_forecasts_and_scores(
    server: tuple[str, dict[str, str]],
) -> None:
    base, headers = server
    assert snap(KERB) == snap(PARK) == snap(BUSY_KERB) == snap(QUIET_BLOCK)  # one CAMS cell
    days: dict[str, dict[str, list[float | None]]] = {}
    for name, point in (("kerb", KERB), ("park", PARK)):
        forecast = httpx.post(
            f"{base}/v1/airquality/forecast",
            json={
                "latitude": point.lat,
                "longitude": point.lon,
                "date": midday().date().isoformat(),
                "timezone": "UTC",
            },
            headers=headers,
            timeout=30,
        )
        assert forecast.status_code == 200, forecast.text
        days[name] = forecast.json()["measures"]
    kerb_no2, park_no2 = days["kerb"]["no2"][10], days["park"]["no2"][10]
    assert kerb_no2 is not None
    assert park_no2 is not None
    assert kerb_no2 > 1.2 * park_no2
    kerb_score, park_score = (days[n]["clean_air_score"][10] for n in ("kerb", "park"))
    assert kerb_score is not None
    assert park_score is not None
    assert kerb_score < park_score

    scores = {}
    for name, point in (("kerb", BUSY_KERB), ("block", QUIET_BLOCK)):
        scored = httpx.post(
            f"{base}/v1/airquality/score",
            json={"lat": point.lat, "lon": point.lon},
            headers=headers,
            timeout=30,
        )
        assert scored.status_code == 200, scored.text
        scores[name] = scored.json()["score"]
    # The fake answers the same everywhere: only the street-level layer tells them apart.
    assert scores["kerb"] < scores["block"], scores


def plan(
    base: str, headers: Mapping[str, str], start: Point, end: Point, at: datetime | None = None
) -> str:
    walk = {
        "start": {"latitude": start.lat, "longitude": start.lon},
        "end": {"latitude": end.lat, "longitude": end.lon},
        "activity_type": "walking",
        "start_time": (at or midday()).isoformat(),
    }
    submitted = httpx.post(f"{base}/v1/routes", json=walk, headers=dict(headers), timeout=30)
    assert submitted.status_code == 202, submitted.text
    request_id = submitted.json()["request_id"]
    assert isinstance(request_id, str)
    return request_id


def test_walks_along_busy_roads_find_cleaner_routes_in_one_cams_cell(
    server: tuple[str, dict[str, str]],
) -> None:
    base, headers = server
    assert len({snap(point) for ends in WALKS.values() for point in ends}) == 1
    submitted = {name: plan(base, headers, *ends) for name, ends in WALKS.items()}
    for name, request_id in submitted.items():
        body = poll_until_finished(base, headers, request_id, within=POLL_FOR)
        assert body["status"] == "completed", (name, body)
        result = body["result"]
        routes = result["routes"]
        goals = [route["goal"] for route in routes]
        # With one value for the whole cell, before the street-level layer every walk
        # answered "Direct route is the cleanest": here each has a cleaner way.
        assert len(routes) >= 2, (name, goals)
        cleaner, direct = routes[0], routes[-1]
        assert cleaner["goal"]["title"] == "Cleanest air", (name, goals)
        assert direct["goal"]["title"] == "Shortest route", (name, goals)
        assert direct["distance"] == pytest.approx(result["original_distance"], abs=1)
        for alternative in routes[:-1]:
            cut = alternative["dose_delta_pct"]
            assert cut >= MATERIAL_REDUCTION_PCT, (name, alternative["goal"])
            assert alternative["summary"]["inhaled_dose"] < result["original_dose"], name
            assert alternative["distance"] <= (1 + MAX_DETOUR) * result["original_distance"]
            # What the goal says is what the figures say.
            description = alternative["goal"]["description"]
            exact = (1 - alternative["summary"]["inhaled_dose"] / result["original_dose"]) * 100
            assert description.startswith(f"{exact:.0f} % less pollution inhaled"), (name, cut)


def enriched_dose(
    base: str, headers: Mapping[str, str], waypoints: Sequence[Sequence[float]], at: datetime
) -> float:
    """The dose `POST /v1/airquality/routes` gives for a walk along `waypoints` from `at`, each
    passed when the planner says (at walking speed along the great-circle legs). A longer
    route than one enrichment takes is sent in parts that share their ends, with each
    waypoint's time: the trapezoid dose of the whole is the sum of its parts'."""
    points = [Point(lat, lon) for lat, lon in waypoints]
    times = estimated_times(points, at, 1.3)
    total = 0.0
    for first in range(0, len(points) - 1, MAX_WAYPOINTS - 1):
        part = range(first, min(first + MAX_WAYPOINTS, len(points)))
        answer = httpx.post(
            f"{base}/v1/airquality/routes",
            json={
                "activity_type": "walking",
                "waypoints": [
                    {"lat": points[i].lat, "lon": points[i].lon, "time": times[i].isoformat()}
                    for i in part
                ],
            },
            headers=dict(headers),
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        total += answer.json()["summary"]["inhaled_dose"]
    return total


def test_a_plan_across_the_hour_reports_and_claims_by_the_enrichment_endpoints_dose(
    server: tuple[str, dict[str, str]],
) -> None:
    """Open-Meteo answers one value per cell and hour; street level over it follows the
    traffic through the hour. A walk leaving at 10:45 is planned and described with the air
    the enrichment endpoint gives for each waypoint at its time (issue 30: the plan used
    each hour's start), so every route's dose is the endpoint's, and each alternative's cut
    holds by it."""
    base, headers = server
    at = midday() + timedelta(minutes=45)
    request_id = plan(base, headers, *ACROSS_THE_HOUR, at=at)
    body = poll_until_finished(base, headers, request_id, within=POLL_FOR)
    assert body["status"] == "completed", body
    routes = body["result"]["routes"]
    assert len(routes) >= 2  # a cleaner way, whose cut is checked below
    assert routes[-1]["duration"] > 15 * 60  # crosses the hour
    doses = [enriched_dose(base, headers, route["waypoints"], at) for route in routes]
    for route, dose in zip(routes, doses, strict=True):
        # Each figure is rounded to 6 decimals, the parts' sum up to three times.
        assert route["summary"]["inhaled_dose"] == pytest.approx(dose, abs=2.5e-6)
    for route, dose in zip(routes[:-1], doses[:-1], strict=True):
        assert (1 - dose / doses[-1]) * 100 >= MATERIAL_REDUCTION_PCT, route["goal"]
