"""msgspec structs of `POST /ext/v1/airquality/history`: a point's past hours, paged."""

from __future__ import annotations

import datetime
from typing import Annotated, Literal

import msgspec

from cleanair_core.air.history import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from cleanair_http.extension_schemas import (
    Concentration,
    GroupId,
    IndexCode,
    OfficialIndex,
    StationUsed,
)
from cleanair_http.schemas import ClientLabel, Latitude, Longitude

#: A page token's most characters (the server's are about 150).
MAX_PAGE_TOKEN = 512


class HistoryRequest(msgspec.Struct):
    lat: Latitude
    lon: Longitude
    start: Annotated[
        datetime.datetime,
        msgspec.Meta(
            description="The first instant wanted (UTC without an offset): its hour is the "
            "first one; at most 30 days before the request"
        ),
    ]
    end: (
        Annotated[
            datetime.datetime,
            msgspec.Meta(
                description="Where the span ends (UTC without an offset), after `start` and "
                "not after now: the hours before it, and the one it falls in when it is not "
                "on the hour; default now (this hour included)"
            ),
        ]
        | None
    ) = None
    indexes: (
        Annotated[
            list[IndexCode],
            msgspec.Meta(
                min_length=1,
                max_length=3,
                description="Official indexes to compute for each hour; default: the "
                "official index of the point's country where the service has it, else all",
            ),
        ]
        | None
    ) = None
    group: (
        Annotated[
            GroupId,
            msgspec.Meta(
                description="Only this group's advice in each index's `advice`, as the "
                "conditions' `group` (it may change from page to page); default: the general "
                "population's and every group's the index names"
            ),
        ]
        | None
    ) = None
    page_size: Annotated[
        int,
        msgspec.Meta(ge=1, le=MAX_PAGE_SIZE, description="Hours per page (a page may hold fewer)"),
    ] = DEFAULT_PAGE_SIZE
    page_token: (
        Annotated[
            str,
            msgspec.Meta(
                min_length=1,
                max_length=MAX_PAGE_TOKEN,
                description="The previous page's `next_page_token`, sent with the same "
                "`lat`, `lon`, `start`, `end` and `indexes` by the same connection within an "
                "hour of the first page; omitted for the first page",
            ),
        ]
        | None
    ) = None
    client: ClientLabel | None = None


class HourProvenance(msgspec.Struct):
    kind: Annotated[
        Literal["measured", "fused", "modelled"],
        msgspec.Meta(
            description="`measured`: a station within reach (its weight at the point at "
            "least 0.5) measured the hour ending at `time`, and the value was fused with it; "
            "`fused`: station observations moved a value by more than 0.1 %; `modelled`: "
            "no station did (docs/air-quality-model.md, History)"
        ),
    ]
    source: Annotated[
        str,
        msgspec.Meta(
            description="`embedded-model` or `cams`, with `+stations` when station "
            "observations moved a value by more than 0.1 %"
        ),
    ]
    stations: Annotated[
        list[StationUsed],
        msgspec.Meta(
            description="The stations whose weight at the point is at least 1 % for some "
            "pollutant that hour, heaviest first"
        ),
    ]


class HistoryHour(msgspec.Struct):
    time: Annotated[
        datetime.datetime,
        msgspec.Meta(description="The start of the hour the values describe (UTC)"),
    ]
    clean_air_score: Annotated[
        Annotated[int, msgspec.Meta(ge=0, le=100)] | None,
        msgspec.Meta(description="Clean Air Score, 0-100: 100 is cleanest; null without data"),
    ]
    pollutants: Annotated[
        dict[str, Concentration],
        msgspec.Meta(description="The hour's concentrations, per pollutant, µg/m³"),
    ]
    indexes: Annotated[
        list[OfficialIndex],
        msgspec.Meta(
            description="The official indexes, in the order asked for, each averaged over "
            "up to the 24 hours ending with this one (as the conditions')"
        ),
    ]
    provenance: Annotated[HourProvenance, msgspec.Meta(description="How the hour was made")]


class HistoryResponse(msgspec.Struct, omit_defaults=True):
    hours: Annotated[list[HistoryHour], msgspec.Meta(description="This page's hours, oldest first")]
    next_page_token: Annotated[
        str | None,
        msgspec.Meta(description="The token of the next page; absent on the last page"),
    ] = None
