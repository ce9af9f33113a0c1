"""PostgreSQL array parameters written as one text literal each.

A batch's statement (`ADMISSIONS`, `SETTLE`) takes a column of values per parameter. Passed
as Python lists, psycopg dumps them element by element in Python (a dumper looked up and a
regular expression to quote each value): a third of the request path's CPU on the event
loop. Written here as the server's array input syntax, a parameter is one string, built with
C string methods; the statement casts it (`%s::text[]`) exactly as it cast the list.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime


def _element(value: str | int | datetime | None) -> str:
    if value is None:
        return "NULL"
    # Quoted always, so no value is read as NULL or loses its spaces; inside quotes only a
    # backslash and a double quote need escaping (PostgreSQL's array input syntax).
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def array_literal(values: Sequence[str | int | datetime | None]) -> str:
    """`values` as a one-dimensional array literal (None as NULL) for a `%s::T[]` parameter;
    a datetime as its ISO text, which carries its UTC offset to a `timestamptz[]`."""
    if not values:
        return "{}"
    if None not in values:
        texts = list(map(str, values))
        flat = "".join(texts)
        if "\\" not in flat and '"' not in flat:  # the usual case: keys, hashes, numbers
            return '{"' + '","'.join(texts) + '"}'
    return "{" + ",".join(map(_element, values)) + "}"
