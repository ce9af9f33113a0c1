"""A served score's CPU in the core (issue 34): each cut keeps every answer as it was.

Where a cut restructures a computation, hypothesis compares it with the formula it replaced,
kept here as it was on main: the same values, bit for bit (and the same datetimes, tzinfo and
fold included). Where a cut only does less work, a test shows the work is not done.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleanair_core.access.accounts import Owner, OwnerKind
from cleanair_core.access.connections import Caller
from cleanair_core.access.scopes import Scope
from cleanair_core.access.tokens import Environment, token_environment
from cleanair_core.air import fusion
from cleanair_core.air.fused_air import FusedAir
from cleanair_core.air.gridded_fused_air import GriddedFusedAir
from cleanair_core.air.point_score import score_sample
from cleanair_core.air.pollutants import Pollutant
from cleanair_core.air.score import EEA_2024_BOUNDS, clean_air_score, sub_index
from cleanair_core.clock import ManualClock
from cleanair_core.credits import ledger
from cleanair_core.credits.final_charges import ChargeOnAnswer
from cleanair_core.credits.ledger import Billable
from cleanair_core.geo import Point
from cleanair_core.keys import TokenKeys
from cleanair_core.policy import Policy
from cleanair_core.ports import Sources
from cleanair_core.service import CleanAir
from cleanair_core.use_cases import air as air_use_cases
from cleanair_core.use_cases.credits import charged
from cleanair_storage.memory import MemoryStore
from support.fakes import HELSINKI, FakeGeolocator, FakeIp, FakeNamer, FakeSource

NOW = datetime(2026, 11, 24, 12, 20, tzinfo=UTC)


def make_core() -> tuple[CleanAir, str]:
    """A core over the in-memory store and local fakes, and a token of its one user."""
    sources = Sources(FakeSource(), FakeGeolocator(HELSINKI), FakeIp(), FakeNamer(), local_air=True)
    keys = TokenKeys(b"score-cpu-tests-key-of-32-bytes!!")
    core = CleanAir(MemoryStore(), keys, Policy(), ManualClock(NOW), sources=sources)
    core.add_user("alice")
    token = core.redeem_pairing_code(core.create_pairing_code("alice"), "phone", "1.2.3.4").token
    return core, token


# -- the formulas as they were ------------------------------------------------------------------


def old_clean_air_score(concentrations: Mapping[Pollutant, float | None]) -> int | None:
    worst: float | None = None
    for pollutant, value in concentrations.items():
        if value is None or pollutant not in EEA_2024_BOUNDS or math.isnan(value):
            continue
        index = sub_index(pollutant, value)
        if worst is None or index > worst:
            worst = index
    if worst is None:
        return None
    return max(0, min(100, math.floor(100.0 - worst + 1e-9)))


def old_observation_hour(at: datetime) -> datetime:
    floor = at.replace(minute=0, second=0, microsecond=0)
    return floor if floor == at else floor + fusion.HOUR


def old_month_key(at: datetime) -> str:
    at = at.astimezone(UTC)
    return f"{at.year:04d}-{at.month:02d}"


def old_day_key(at: datetime) -> str:
    return at.astimezone(UTC).date().isoformat()


# -- the score's integer ------------------------------------------------------------------------

#: Any float a source might give, the bands' bounds and their neighbours included.
_BOUNDS = sorted({bound for bounds in EEA_2024_BOUNDS.values() for bound in bounds})
values = (
    st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(_BOUNDS).flatmap(
        lambda b: st.sampled_from([b, math.nextafter(b, -math.inf), math.nextafter(b, math.inf)])
    )
    | st.floats(min_value=-10, max_value=400)
    | st.none()
)
airs = st.dictionaries(st.sampled_from(list(Pollutant)), values, max_size=len(Pollutant))


@given(airs)
def test_the_score_is_the_old_formulas_integer(air: dict[Pollutant, float | None]) -> None:
    assert clean_air_score(air) == old_clean_air_score(air)


# -- the observation hour -----------------------------------------------------------------------

#: Aware offsets, whole and not (an hour's floor is local), and naive instants.
aware = st.sampled_from(
    [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=3))]
)
instants = st.builds(
    lambda at, on_the_hour, fold: (
        at.replace(minute=0, second=0, microsecond=0) if on_the_hour else at
    ).replace(fold=fold),
    st.datetimes(
        min_value=datetime(1971, 1, 1),  # noqa: DTZ001 - hypothesis takes naive bounds
        max_value=datetime(2200, 1, 1),  # noqa: DTZ001
        timezones=st.one_of(st.none(), aware),
    ),
    st.booleans(),
    st.integers(0, 1),
)


@given(instants)
def test_the_observation_hour_is_the_old_one_tzinfo_and_fold_included(at: datetime) -> None:
    new, old = fusion.observation_hour(at), old_observation_hour(at)
    assert (new, new.tzinfo, new.fold) == (old, old.tzinfo, old.fold)
    assert new.replace(tzinfo=None) == old.replace(tzinfo=None)


def test_an_instant_on_the_hour_is_its_own_observation_hour() -> None:
    at = datetime(2026, 11, 24, 12, tzinfo=UTC)
    assert fusion.observation_hour(at) is at  # no datetime built anew for a score's sample


@given(st.dictionaries(st.integers(0, 5), st.booleans(), max_size=4), st.sets(st.integers(0, 6)))
def test_nothing_known_is_what_the_known_latest_said(
    read: dict[int, bool], asked: set[int]
) -> None:
    """`_nothing_known` against the old test, `known is not None and not any(known.values())`:
    each read hour holds observations (True) or none (False)."""
    base = datetime(2026, 11, 24, tzinfo=UTC)
    hours = {base + timedelta(hours=h) for h in asked}
    state = _State(
        OrderedDict(
            (base + timedelta(hours=h), ({Pollutant.NO2: object()} if held else {}))
            for h, held in read.items()
        )
    )
    fused: Any = GriddedFusedAir.__new__(GriddedFusedAir)
    fused._lock = _NoLock()
    known = FusedAir._known_latest(fused, state, hours)  # type: ignore[arg-type]
    expected = known is not None and not any(known.values())
    assert GriddedFusedAir._nothing_known(fused, state, hours) is expected  # type: ignore[arg-type]


class _State:
    def __init__(self, latest: OrderedDict[datetime, dict[Pollutant, object]]) -> None:
        self.latest = latest


class _NoLock:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


# -- the ledger's keys --------------------------------------------------------------------------


@given(st.datetimes(min_value=datetime(1, 1, 2), timezones=aware))  # noqa: DTZ001 - naive bound
def test_the_ledger_keys_are_the_old_ones(at: datetime) -> None:
    month, day = old_month_key(at), old_day_key(at)
    assert (ledger.month_key(at), ledger.day_key(at)) == (month, day)
    assert ledger.windows_at(at) == ledger.window_keys(month, day)


def test_a_days_keys_are_formatted_once() -> None:
    at = datetime(2026, 11, 24, 12, 20, tzinfo=UTC)
    ledger.windows_at(at)
    before = ledger._keys_of_day.cache_info().hits
    for later in range(5):
        ledger.month_key(at + timedelta(minutes=later))
        ledger.windows_at(at + timedelta(hours=later))
    assert ledger._keys_of_day.cache_info().hits == before + 10


# -- admission ----------------------------------------------------------------------------------


@given(st.text(max_size=60) | st.sampled_from([e.value for e in Environment]))
def test_a_tokens_environment_is_read_as_before(middle: str) -> None:
    token = f"ca_{middle}_{'a' * 43}"
    try:
        expected: Environment | None = Environment(middle)
    except ValueError:
        expected = None
    assert token_environment(token) is (expected if "_" not in middle else None)


def test_a_callers_connection_key_is_its_id_as_text_made_once() -> None:
    connection = uuid.uuid4()
    caller = Caller(connection, Owner(OwnerKind.USER, "alice"), frozenset())
    assert caller.connection_key == str(connection)
    assert caller.connection_key is caller.connection_key
    assert caller == Caller(connection, Owner(OwnerKind.USER, "alice"), frozenset())


def test_the_general_request_limit_is_made_once_per_context() -> None:
    core, _ = make_core()
    assert core.context.request_limit == core.policy.requests
    assert core.context.request_limit is core.context.request_limit


# -- the charge ---------------------------------------------------------------------------------


def test_a_local_calls_charge_is_the_final_charge_itself() -> None:
    """No generator-based context manager around it (its layer cost each score ~4 µs)."""
    core, token = make_core()
    caller = core.admit(token, scope=Scope.AQ_READ).caller
    made = charged(core.context, caller, Billable.SCORE, upstream=False)
    assert isinstance(made, ChargeOnAnswer)


def test_a_score_on_local_air_builds_one_sample_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The use case asks no sample of its own to learn whether local air waits (it never
    does); `score_at` builds the one it computes."""
    core, token = make_core()
    built: list[object] = []
    original = score_sample

    def counted(*args: Any) -> Any:
        built.append(args)
        return original(*args)

    monkeypatch.setattr(air_use_cases, "score_sample", counted)
    admitted = core.admit(token, scope=Scope.AQ_READ, defer_hit=True)
    assert admitted.proof is not None
    asyncio.run(core.score(admitted.proof, point=Point(60.17, 24.94), pending=admitted.pending))
    assert built == []
