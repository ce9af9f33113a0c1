"""The stored form of a plan's result: exact, tagged with its version, and readable later."""

from __future__ import annotations

import json
import math

import attrs
import msgspec
import pytest
from hypothesis import given

from cleanair_core.routes.plans import PlanKind
from cleanair_core.routes.results import DeparturesResult, PlanResult
from cleanair_http import responses
from cleanair_storage.plan_results import (
    PLAN_RESULT_VERSION,
    UnreadablePlanResult,
    decode_plan_result,
    encode_plan_result,
)
from support.plan_results import departures_result, departures_results, plan_result, plan_results


@given(plan_results)
def test_a_result_survives_storage_exactly(result: PlanResult) -> None:
    assert decode_plan_result(encode_plan_result(result)) == result


@given(departures_results)
def test_a_departures_result_survives_storage_exactly(result: DeparturesResult) -> None:
    assert decode_plan_result(encode_plan_result(result), PlanKind.DEPARTURES) == result


def test_a_result_is_read_as_its_plans_kind() -> None:
    """The kind stored beside a result decides how it is read: one kind's result is not
    mistaken for the other's."""
    with pytest.raises(UnreadablePlanResult):
        decode_plan_result(encode_plan_result(plan_result()), PlanKind.DEPARTURES)
    with pytest.raises(UnreadablePlanResult):
        decode_plan_result(encode_plan_result(departures_result()), PlanKind.ROUTES)
    untagged = msgspec.json.encode(responses.plan_result(plan_result())).decode()
    with pytest.raises(UnreadablePlanResult):
        decode_plan_result(untagged, PlanKind.DEPARTURES)


def test_the_stored_text_carries_its_version() -> None:
    stored = json.loads(encode_plan_result(plan_result()))
    assert stored["version"] == PLAN_RESULT_VERSION == 1
    assert stored["result"]["routes"][0]["goal"]["title"] == "Shortest route"


def test_a_result_stored_before_the_version_tag_still_reads() -> None:
    """Releases before the tag stored the poll's own response document."""
    result = plan_result(alternatives=2)
    legacy = msgspec.json.encode(responses.plan_result(result)).decode()
    read = decode_plan_result(legacy)
    assert isinstance(read, PlanResult)
    # The same answer to a poll; only the waypoint times (never shown) are gone.
    assert responses.plan_result(read) == responses.plan_result(result)
    assert all(planned.route.times == [] for planned in read.routes)


@pytest.mark.parametrize(
    "stored",
    [
        '{"version": 2, "result": {}}',
        '{"version": 1, "result": {"routes": 3}}',
        '{"activity_type": "walking"}',
        "not json",
    ],
)
def test_an_unreadable_result_says_so(stored: str) -> None:
    with pytest.raises(UnreadablePlanResult):
        decode_plan_result(stored)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_result_that_json_cannot_hold_is_refused_when_stored(bad: float) -> None:
    """Written as null it could never be read back: the plan must fail (and be refunded)
    instead of completing unreadable."""
    with pytest.raises(ValueError, match="JSON"):
        encode_plan_result(attrs.evolve(plan_result(), original_distance=bad))
