"""A completed plan's result as stored text: JSON under a version tag.

    {"version": 1, "result": {...the PlanResult's (or DeparturesResult's) fields...}}

The plan's kind (stored beside it) says which of the two the result is.

The tag lets a later release change `PlanResult` and still read what an earlier one stored:
add a version and a decoder for the old one, never rewrite stored rows in place. Documents
written before the tag existed (the contract's response shape, doses rounded) decode as
version 0; they carry no waypoint times, which no poll shows.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import msgspec

from cleanair_core.air.pollutants import Pollutant
from cleanair_core.air.score import BandedScore
from cleanair_core.geo import Point
from cleanair_core.routes.enrichment import EnrichedRoute, RouteSummary
from cleanair_core.routes.network import PlanActivityType
from cleanair_core.routes.plans import AnyPlanResult, PlanKind
from cleanair_core.routes.results import DeparturesResult, PlannedRoute, PlanResult, RouteGoal

PLAN_RESULT_VERSION = 1


class _Envelope(msgspec.Struct):
    version: int
    result: msgspec.Raw


class UnreadablePlanResult(ValueError):
    """A stored result this release cannot read (written by a newer one, or damaged)."""


def encode_plan_result(result: AnyPlanResult) -> str:
    """The stored text of `result` (exact: floats round-trip, nothing is rounded here).

    Raises ValueError for a NaN or an infinity anywhere in it: JSON has neither (msgspec
    would write null and the stored result could never be read back), so such a plan fails
    and is refunded rather than completed unreadable.
    """
    document = {"version": PLAN_RESULT_VERSION, "result": msgspec.to_builtins(result)}
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def decode_plan_result(text: str, kind: PlanKind = PlanKind.ROUTES) -> AnyPlanResult:
    """The result of a plan of `kind` stored as `text`, whichever release wrote it."""
    try:
        raw = msgspec.json.decode(text)
        if isinstance(raw, dict) and "version" in raw:
            envelope = msgspec.json.decode(text, type=_Envelope)
            if envelope.version != PLAN_RESULT_VERSION:
                raise UnreadablePlanResult(
                    f"a plan result of version {envelope.version}; this release reads "
                    f"up to {PLAN_RESULT_VERSION}"
                )
            if kind is PlanKind.DEPARTURES:
                return msgspec.json.decode(envelope.result, type=DeparturesResult)
            return msgspec.json.decode(envelope.result, type=PlanResult)
        if kind is PlanKind.DEPARTURES:  # departures plans were never stored untagged
            raise UnreadablePlanResult("a departures result without its version tag")
        return _from_contract_document(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, KeyError, TypeError) as error:
        raise UnreadablePlanResult(f"a damaged plan result: {error}") from None


def _from_contract_document(document: dict[str, Any]) -> PlanResult:
    """Version 0: the poll's own response shape, as stored before the version tag."""
    return PlanResult(
        activity=PlanActivityType(document["activity_type"]),
        routes=[_planned_route(route) for route in document["routes"]],
        original_distance=document["original_distance"],
        original_clean_air_score=document.get("original_clean_air_score"),
        original_dose=document.get("original_dose"),
        best_route_index=document.get("best_route_index", 0),
    )


def _planned_route(document: dict[str, Any]) -> PlannedRoute:
    summary = document["summary"]
    score = summary.get("clean_air_score")
    route = EnrichedRoute(
        points=[Point(lat, lon) for lat, lon in document["waypoints"]],
        times=list[datetime](),
        measures=document["measures"],
        summary=RouteSummary(
            clean_air_score=None if score is None else BandedScore(**score),
            inhaled_dose=summary.get("inhaled_dose"),
            average_pollutants={
                Pollutant(name): value
                for name, value in summary.get("average_pollutants", {}).items()
            },
        ),
    )
    return PlannedRoute(
        route=route,
        distance=document["distance"],
        distance_delta=document["distance_delta"],
        clean_air_score_delta_pct=document["clean_air_score_delta_pct"],
        dose_delta_pct=document.get("dose_delta_pct"),
        duration=document.get("duration"),
        goal=RouteGoal(**document["goal"]),
    )
