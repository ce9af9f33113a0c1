"""msgspec structs of the extension API (`/ext/v1`, versioned apart from the contract's
frozen `/v1`): what its endpoints accept and answer, with every field's units."""

from __future__ import annotations

import datetime
import uuid
from typing import Annotated, Literal

import msgspec

from cleanair_core.routes.network import PlanActivityType
from cleanair_http.schemas import (
    MAX_SCAN,
    ClientLabel,
    Latitude,
    Location,
    Longitude,
    PlannedRoute,
    PlanRouteStatus,
    WifiAccessPoint,
)

#: The extension API's own version (the contract's `/v1` stays 1.0.0).
EXTENSION_VERSION = "1.0.0"

IndexCode = Literal["us_epa_2024", "eu_eaqi_2024", "uk_daqi"]

#: The groups an index's advice may be for (`cleanair_core.air.indexes.advice.Group`).
GroupId = Literal[
    "general",
    "heart_or_lung_disease",
    "older_adults",
    "children_and_teens",
    "outdoor_workers",
    "active_people",
    "sensitive",
    "at_risk",
]

#: The rules a field of an /ext/v1 request can break (docs/api-choices.md says what each
#: means); a client may switch on them.
Rule = Literal[
    "json",
    "type",
    "required",
    "minimum",
    "maximum",
    "too_short",
    "too_long",
    "pattern",
    "enum",
    "format",
    "unique",
    "unknown",
    "invalid",
]


class FieldViolation(msgspec.Struct):
    field: Annotated[
        str,
        msgspec.Meta(
            description="Where: a dotted path into the request body (`start.latitude`, "
            "`wifi.0.mac`), the empty string for the body as a whole, or a path "
            "parameter's name (`request_id`)"
        ),
    ]
    rule: Annotated[
        Rule,
        msgspec.Meta(
            description="Which rule: `json` (not JSON in UTF-8), `type`, `required`, "
            "`minimum`/`maximum` (a number's or a time's bound), `too_short`/`too_long` (a "
            "string's characters, a list's items), `pattern`, `enum`, `format` (a date-time, "
            "a UUID), `unique` (a list naming a value twice), `unknown` (a field the schema "
            "does not define), `invalid` (anything else)"
        ),
    ]
    message: Annotated[
        str,
        msgspec.Meta(
            description="The rule and its bound in words (`must be at least 5`); never the "
            "value sent"
        ),
    ]


class ValidationErrorResponse(msgspec.Struct):
    """An /ext/v1 422, in the spirit of RFC 9457's problem details: the contract's envelope
    with the list of what failed."""

    detail: Annotated[
        str,
        msgspec.Meta(
            description="`Request validation failed`, or `No location could be resolved from "
            "the request` (the input is never echoed)"
        ),
    ]
    errors: Annotated[
        list[FieldViolation],
        msgspec.Meta(
            description="Each field that broke a rule, in the request's order (empty only "
            "when no field is at fault: no location could be resolved from a valid scan)"
        ),
    ]


class ConditionsRequest(msgspec.Struct):
    wifi: (
        Annotated[
            list[WifiAccessPoint],
            msgspec.Meta(
                max_length=MAX_SCAN,
                description="A Wi-Fi scan, resolved server-side to a coarse point; used only "
                "without lat/lon (as in the score request)",
            ),
        ]
        | None
    ) = None
    lat: Latitude | None = None
    lon: Longitude | None = None
    client: ClientLabel | None = None
    indexes: (
        Annotated[
            list[IndexCode],
            msgspec.Meta(
                min_length=1,
                max_length=3,
                description="Official indexes to compute; default: the official index of the "
                "point's country where the service has it, else all",
            ),
        ]
        | None
    ) = None
    group: (
        Annotated[
            GroupId,
            msgspec.Meta(
                description="Only this group's advice in each index's `advice`; an index "
                "that does not name the group gives its `general` advice instead "
                "(docs/indexes.md). Default: the general population's and every group's the "
                "index names"
            ),
        ]
        | None
    ) = None


class Concentration(msgspec.Struct):
    concentration: Annotated[float, msgspec.Meta(description="This hour's mean")]
    units: Annotated[Literal["ug/m3"], msgspec.Meta(description="Micrograms per cubic metre")]
    standard_error: Annotated[
        float,
        msgspec.Meta(
            ge=0,
            description="How wrong the value may be, µg/m³: the background's own error, "
            "shrunk where station observations speak (docs/science.md)",
        ),
    ]
    interval90: Annotated[
        list[float],
        msgspec.Meta(
            min_length=2,
            max_length=2,
            description="The 90 % interval [low, high], µg/m³, never below zero",
        ),
    ]
    corrected: Annotated[
        bool,
        msgspec.Meta(
            description="Whether station observations changed the value by more than 0.1 %"
        ),
    ]


class IndexConcentration(msgspec.Struct):
    concentration: Annotated[
        float, msgspec.Meta(description="The averaged value the index was computed from, µg/m³")
    ]
    averaging: Annotated[
        Literal["1h", "8h", "24h", "nowcast"],
        msgspec.Meta(
            description="How it was averaged; shorter than the index's official period when "
            "the history was (`1h` where the rules ask for `8h` or `24h`)"
        ),
    ]


class HealthAdvice(msgspec.Struct):
    general: Annotated[str, msgspec.Meta(description="The index's advice for everyone")]
    sensitive: Annotated[
        str, msgspec.Meta(description="Its advice for sensitive or at-risk people")
    ]


class AdviceSource(msgspec.Struct):
    document: Annotated[str, msgspec.Meta(description="The document the text comes from")]
    section: Annotated[str, msgspec.Meta(description="Where in it")]
    url: Annotated[str, msgspec.Meta(description="Its address")]
    summary: Annotated[
        bool,
        msgspec.Meta(description="True where the text is the service's summary, not a quote"),
    ]


class GroupAdvice(msgspec.Struct):
    group: Annotated[
        GroupId,
        msgspec.Meta(
            description="Whom it is for: `general`, or a group the index names (the US EPA: "
            "`heart_or_lung_disease`, `older_adults`, `children_and_teens`, "
            "`outdoor_workers`, `active_people`; the EEA: `sensitive`; the UK DAQI: `at_risk`)"
        ),
    ]
    advice: Annotated[str, msgspec.Meta(description="The index's own text for the group")]
    source: Annotated[AdviceSource, msgspec.Meta(description="Where the text comes from")]


class OfficialIndex(msgspec.Struct):
    code: Annotated[IndexCode, msgspec.Meta(description="The index (docs/indexes.md)")]
    name: Annotated[str, msgspec.Meta(description="The index's name")]
    value: Annotated[
        int,
        msgspec.Meta(
            description="The index's value on its own scale: AQI 0-500, EAQI band 1-6, DAQI 1-10"
        ),
    ]
    category: Annotated[str, msgspec.Meta(description="The index's name for the value's band")]
    colour: Annotated[str, msgspec.Meta(description="The index's colour for the band, #RRGGBB")]
    dominant_pollutant: Annotated[str, msgspec.Meta(description="The pollutant that set the value")]
    concentrations: Annotated[
        dict[str, IndexConcentration],
        msgspec.Meta(description="Per pollutant (`pm25`, `pm10`, `no2`, `o3`, `so2`)"),
    ]
    health: Annotated[HealthAdvice, msgspec.Meta(description="The index's own advice")]
    advice: Annotated[
        list[GroupAdvice],
        msgspec.Meta(
            description="The index's advice per group at this value: `general` first, then "
            "each group the index names (the US EPA's texts are those for `dominant_pollutant`)"
            "; with the request's `group`, that group's only"
        ),
    ]


class IndexHealth(msgspec.Struct):
    index: Annotated[IndexCode, msgspec.Meta(description="Whose advice this is")]
    general: Annotated[str, msgspec.Meta(description="The index's advice for everyone")]
    sensitive: Annotated[
        str, msgspec.Meta(description="Its advice for sensitive or at-risk people")
    ]


class StationUsed(msgspec.Struct):
    id: Annotated[str, msgspec.Meta(description="The station's id (`openaq:2178`, say)")]
    name: Annotated[str, msgspec.Meta(description="The station's name")]
    distance_m: Annotated[float, msgspec.Meta(description="From the point, metres")]
    weight: Annotated[
        float,
        msgspec.Meta(
            description="The station's residual's share in the correction at the point (its "
            "largest over the pollutants, by magnitude; a kriging weight may be negative): "
            "listed when its magnitude is at least 0.01"
        ),
    ]
    last_value_time: Annotated[
        datetime.datetime,
        msgspec.Meta(description="The end of the hour of the station's value used (UTC)"),
    ]


class Provenance(msgspec.Struct):
    source: Annotated[
        str,
        msgspec.Meta(
            description="`embedded-model` or `cams` (CAMS via Open-Meteo), with `+stations` "
            "when station observations changed a value by more than 0.1 %"
        ),
    ]
    data_time: Annotated[
        datetime.datetime, msgspec.Meta(description="The start of the hour the values describe")
    ]
    age_seconds: Annotated[int, msgspec.Meta(description="Seconds since `data_time`")]
    stations: Annotated[
        list[StationUsed],
        msgspec.Meta(
            description="The stations whose weight at the point is at least 1 % for some "
            "pollutant, heaviest first"
        ),
    ]


class ConditionsResponse(msgspec.Struct):
    clean_air_score: Annotated[
        int, msgspec.Meta(ge=0, le=100, description="Clean Air Score: 100 is cleanest")
    ]
    pollutants: Annotated[
        dict[str, Concentration],
        msgspec.Meta(description="This hour's concentrations, per pollutant"),
    ]
    indexes: Annotated[
        list[OfficialIndex],
        msgspec.Meta(description="The official indexes, in the order asked for"),
    ]
    health: Annotated[
        IndexHealth | None,
        msgspec.Meta(description="The first index's advice (the official one of the place)"),
    ]
    provenance: Annotated[
        Provenance, msgspec.Meta(description="Where the numbers come from, and how old")
    ]
    clean_air_score_interval90: Annotated[
        list[int],
        msgspec.Meta(
            min_length=2,
            max_length=2,
            description="The score at the concentrations' 90 % intervals: [at their high "
            "ends, at their low ends]",
        ),
    ]


class DeparturesRequest(msgspec.Struct):
    start: Annotated[Location, msgspec.Meta(description="Where the trip starts")]
    end: Annotated[
        Location,
        msgspec.Meta(description="Where it ends: at most 15 km from `start` in a straight line"),
    ]
    activity_type: Annotated[
        PlanActivityType, msgspec.Meta(description="How the trip is travelled")
    ]
    earliest: Annotated[
        datetime.datetime,
        msgspec.Meta(
            description="The first start time to consider (UTC without an offset); inside "
            "the window air data exists for, like a plan's `start_time`"
        ),
    ]
    latest: Annotated[
        datetime.datetime,
        msgspec.Meta(
            description="The last start time to consider (UTC without an offset): not before "
            "`earliest`, at most 24 hours after it, inside the forecast horizon (84 hours)"
        ),
    ]
    step_minutes: Annotated[
        int,
        msgspec.Meta(
            ge=5,
            le=240,
            description="Minutes between candidate start times, from `earliest`",
        ),
    ] = 30


class DeparturesSubmitted(msgspec.Struct):
    request_id: Annotated[
        uuid.UUID,
        msgspec.Meta(
            description="The departures plan's id, to poll at "
            "GET /ext/v1/routes/departures/{request_id}"
        ),
    ]


_DOSE = (
    "Relative, unitless inhaled dose over the trip (as a route's `inhaled_dose`): higher "
    "means more inhaled risk; null without dose data"
)


class Departure(msgspec.Struct):
    start_time: Annotated[datetime.datetime, msgspec.Meta(description="Leaving then (UTC)")]
    dose: Annotated[float | None, msgspec.Meta(description=_DOSE)]
    clean_air_score: Annotated[
        float | None,
        msgspec.Meta(
            description="The route's time-weighted Clean Air Score (0-100, higher is "
            "cleaner); null without data"
        ),
    ]
    distance: Annotated[float, msgspec.Meta(description="The route's length, metres")]


class BestDeparture(msgspec.Struct):
    start_time: Annotated[datetime.datetime, msgspec.Meta(description="Leaving then (UTC)")]
    dose: Annotated[float | None, msgspec.Meta(description=_DOSE)]
    route: Annotated[
        PlannedRoute,
        msgspec.Meta(
            description="The route to take then, as a plan's route; its deltas compare it with "
            "the direct route leaving at the same time"
        ),
    ]


class DeparturesResult(msgspec.Struct):
    departures: Annotated[
        list[Departure],
        msgspec.Meta(
            description="Every candidate start time in order, each with the least-dose route "
            "within the plan's detour budget (25 % longer than the direct route) then"
        ),
    ]
    best: Annotated[
        BestDeparture,
        msgspec.Meta(description="The departure with the least dose (the earliest of equals)"),
    ]
    baseline_dose: Annotated[
        float | None,
        msgspec.Meta(description=f"The direct route's dose leaving at `earliest`. {_DOSE}"),
    ]
    dose_saved_pct: Annotated[
        float | None,
        msgspec.Meta(
            description="(baseline_dose - best.dose) / baseline_dose x 100, percent; null "
            "without both doses"
        ),
    ]


class DeparturesPollResponse(msgspec.Struct):
    status: Annotated[PlanRouteStatus, msgspec.Meta(description="Where the plan is in its life")]
    result: Annotated[
        DeparturesResult | None,
        msgspec.Meta(description="The departures, once status is `completed`"),
    ] = None
    error: Annotated[
        str | None, msgspec.Meta(description="Why the plan failed, once status is `failed`")
    ] = None
