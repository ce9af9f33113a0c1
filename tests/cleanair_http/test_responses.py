"""The mapping from core values to response shapes: one rule for every route on the wire."""

from __future__ import annotations

import json

import attrs
import msgspec

from cleanair_http import responses
from support.plan_results import plan_result, route


def floats_only(measures: dict[str, list[object]]) -> bool:
    return all(
        isinstance(v, float) for series in measures.values() for v in series if v is not None
    )


def test_measures_are_json_floats_however_they_were_computed() -> None:
    """A score of 69 computed as an int is written 69.0, as a stored-and-read one is."""
    ints = attrs.evolve(route(), measures={"clean_air_score": [69, None, 70], "pm2_5": [5, 6, 7]})
    written = json.loads(msgspec.json.encode(responses.enriched_route(ints)))
    assert written["measures"] == {"clean_air_score": [69.0, None, 70.0], "pm2_5": [5.0, 6.0, 7.0]}
    assert floats_only(written["measures"])
    planned = attrs.evolve(plan_result().routes[0], route=ints)
    poll = json.loads(msgspec.json.encode(responses.planned_route(planned)))
    assert floats_only(poll["measures"])
