"""`POST /ext/v1/airquality/history`: a point's past hours, paged (the extension API)."""

from __future__ import annotations

from typing import Any

from litestar import Request, post
from litestar.params import JSONBody

from cleanair_core.air.history import HistoryHour
from cleanair_core.geo import Point
from cleanair_core.use_cases.history import HistoryPage
from cleanair_http import extension_schemas as ext
from cleanair_http import history_schemas as hist
from cleanair_http.auth import authorization_of, core_of, pending_hit_of
from cleanair_http.controllers.airquality import AQ_READ, client_label_of
from cleanair_http.controllers.extension import TAG
from cleanair_http.openapi import SECURITY, extension_error_responses
from cleanair_http.responses import concentration, official_index


@post(
    "/ext/v1/airquality/history",
    status_code=200,
    opt=AQ_READ,
    security=SECURITY,
    summary="A point's past hours, with their indexes and provenance, paged",
    tags=[TAG],
    responses=extension_error_responses(
        400,
        401,
        403,
        422,
        429,
        503,
        s400="`start` is over 30 days ago, or `end` is after now (the forecast covers the "
        "future) (not charged)",
        s422="Request validation failed: an unknown index code or one named twice, an "
        "unknown group, "
        "`page_size` outside 1-168, `end` not after `start`, or a `page_token` not made for "
        "this connection and request, or expired (not charged)",
    ),
)
async def point_history(
    request: Request[Any, Any, Any], data: JSONBody[hist.HistoryRequest]
) -> hist.HistoryResponse:
    """The hours from `start` to `end` (default now) at `lat`/`lon`, oldest first, a page at
    a time: each hour's concentrations (µg/m³), Clean Air Score, official indexes (as the
    conditions give them, averaged over up to the 24 hours ending with the hour) and
    provenance (`measured`, `fused` or `modelled`). Scope `aq:read`; the first page is
    charged for the whole span, 2 credits per started 24 hours (at most 62, for 30 days);
    the pages its `next_page_token` leads to are free."""
    page = await core_of(request).history(
        authorization_of(request),
        point=Point(data.lat, data.lon),
        start=data.start,
        end=data.end,
        indexes=list(data.indexes) if data.indexes is not None else None,
        page_size=data.page_size,
        page_token=data.page_token,
        client=client_label_of(data.client),
        pending=pending_hit_of(request),
    )
    return history_response(page, data.group)


def history_response(page: HistoryPage, group: str | None = None) -> hist.HistoryResponse:
    """The page's answer; `group` keeps each index's advice to that group's
    (`responses.official_index`)."""
    return hist.HistoryResponse(
        hours=[_hour(hour, group) for hour in page.hours], next_page_token=page.next_page_token
    )


def _hour(hour: HistoryHour, group: str | None) -> hist.HistoryHour:
    provenance = hour.provenance
    return hist.HistoryHour(
        time=hour.time,
        clean_air_score=hour.clean_air_score,
        pollutants={
            # Every value has its explanation: fused, or the background's own error.
            pollutant.value: concentration(value, hour.uncertainty[pollutant])
            for pollutant, value in hour.pollutants.items()
        },
        indexes=[official_index(index, group) for index in hour.indexes],
        provenance=hist.HourProvenance(
            kind=provenance.kind.value,
            source=provenance.source,
            stations=[
                ext.StationUsed(
                    s.id, s.name, round(s.distance_m, 1), round(s.weight, 4), s.last_hour_end
                )
                for s in provenance.stations
            ],
        ),
    )


ROUTE_HANDLERS = (point_history,)
