"""Array parameters written as text literals (`array_literal`) reach PostgreSQL as the same
values the lists they replace would: any text, NULLs, integers and instants."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import psycopg
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cleanair_storage.postgres.arrays import array_literal
from support.postgres import PostgresServer

#: Any text PostgreSQL's text type holds (UTF-8, everything but NUL), NULLs among it.
TEXTS = st.lists(
    st.none() | st.text(st.characters(codec="utf-8", exclude_characters="\x00")),
    max_size=8,
)
#: Hypothesis draws many examples through one module's connection.
MANY = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def conn(postgres: PostgresServer) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(postgres.database(), autocommit=True) as connection:
        yield connection


@settings(MANY, max_examples=200)
@given(values=TEXTS)
@example(values=["NULL", "", " spaced ", "{}", "a,b", 'q"uote', "back\\slash"])
@example(values=["NULL", None, ""])
def test_text_arrays_arrive_as_the_values_written(
    conn: psycopg.Connection[tuple[object, ...]], values: list[str | None]
) -> None:
    row = conn.execute("SELECT %s::text[]", (array_literal(values),)).fetchone()
    assert row is not None
    assert row[0] == values


@settings(MANY, max_examples=50)
@given(values=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=8))
def test_integer_arrays_arrive_as_the_values_written(
    conn: psycopg.Connection[tuple[object, ...]], values: list[int]
) -> None:
    assert conn.execute("SELECT %s::bigint[]", (array_literal(values),)).fetchone() == (values,)


@settings(MANY, max_examples=50)
@given(
    values=st.lists(
        st.datetimes(
            # Hypothesis bounds are naive; `timezones` makes each drawn instant aware.
            min_value=datetime(1970, 1, 1),  # noqa: DTZ001
            max_value=datetime(2200, 1, 1),  # noqa: DTZ001
            timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30))]),
        ),
        max_size=8,
    )
)
def test_instants_arrive_as_the_same_instants(
    conn: psycopg.Connection[tuple[object, ...]], values: list[datetime]
) -> None:
    row = conn.execute("SELECT %s::timestamptz[]", (array_literal(values),)).fetchone()
    assert row is not None
    assert row[0] == values
