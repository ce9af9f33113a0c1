"""Which fields of a JSON body break which rules of its struct, in words that never quote
the body.

msgspec stops at the first failure and its messages may quote the input (`Invalid enum
value 'x'`). Here msgspec stays the judge of what is valid: a value is re-checked against
its type with msgspec itself, and only a failing value is looked into, field by field and
item by item, so every failing field is named, not only the first. The words come from the
rule and the schema's bounds alone; a message this module does not recognise becomes the
rule `invalid`, never the message.
"""

from __future__ import annotations

import enum
import itertools
import re
import types
from collections.abc import Iterator
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import msgspec

from cleanair_core.errors import Violation

#: A body that is not JSON at all (or not UTF-8): one violation of the whole body.
MALFORMED = Violation("", "json", "must be a JSON document in UTF-8")

#: msgspec's names of JSON types, in JSON's words.
_TYPE_WORDS = {
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "bool": "a boolean",
    "null": "null",
    "array": "an array",
    "object": "an object",
    "datetime": "an RFC 3339 date-time string",
    "date": "an RFC 3339 full-date string (YYYY-MM-DD)",
    "uuid": "a UUID string",
}
_COMPARISONS = {
    ">=": ("minimum", "must be at least {}"),
    "<=": ("maximum", "must be at most {}"),
    ">": ("minimum", "must be greater than {}"),
    "<": ("maximum", "must be less than {}"),
}
_NUMBER = r"-?[0-9]+(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?"
_AT = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_SEGMENT = re.compile(r"\.(?P<name>[A-Za-z_][A-Za-z0-9_]*)|\[(?P<index>[0-9]+)\]")
_EXPECTED = re.compile(r"Expected `(?P<types>[a-z |]+)`, got `[a-z]+`")
_BOUND = re.compile(rf"Expected `[a-z]+` (?P<op>>=|<=|>|<) (?P<bound>{_NUMBER})")
_LENGTH = re.compile(r"Expected `(?P<kind>str|array|object)` of length (?P<op>>=|<=) (?P<n>[0-9]+)")
_REQUIRED = re.compile(r"Object missing required field `(?P<name>[A-Za-z_][A-Za-z0-9_]*)`")


#: The most violations one answer lists: a body of thousands of bad items gets a bounded
#: answer, and the walk stops there.
MAX_VIOLATIONS = 50


def violations_of(body: bytes, kind: type[msgspec.Struct]) -> list[Violation]:
    """Every field of `body` that breaks a rule of `kind` (a body `kind` refuses: at least
    one violation, at most MAX_VIOLATIONS), in the order of the struct's fields."""
    try:
        value = msgspec.json.decode(body)
    except msgspec.ValidationError:
        # JSON, but not Python's (a number beyond a float's range): msgspec's own answer.
        return [_typed_violation(body, kind)]
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return [MALFORMED]
    found = list(itertools.islice(_violations(value, kind, []), MAX_VIOLATIONS))
    return found or [_typed_violation(body, kind)]


def _typed_violation(body: bytes, kind: type[msgspec.Struct]) -> Violation:
    try:
        msgspec.json.decode(body, type=kind)
    except msgspec.ValidationError as error:
        return _described(str(error), kind, [])
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return MALFORMED
    return Violation("", "invalid", "is invalid")


def _violations(value: Any, kind: Any, path: list[str]) -> Iterator[Violation]:
    problem = _problem(value, kind)
    if problem is None:
        return
    inner = False
    for violation in _inner(value, kind, path):
        inner = True
        yield violation
    if not inner:
        yield _described(problem, kind, path)


def _problem(value: Any, kind: Any) -> str | None:
    """msgspec's message for `value` as a `kind`, None when it is one. Decoded from its own
    JSON, so the rules are exactly those the body was decoded by."""
    try:
        msgspec.json.decode(msgspec.json.encode(value), type=kind)
    except msgspec.ValidationError as error:
        return str(error)
    return None


def _inner(value: Any, kind: Any, path: list[str]) -> Iterator[Violation]:
    """The violations inside a container `value` (a struct's fields, a list's items and its
    length); nothing for a leaf, whose own problem then stands."""
    bare, meta = _unwrapped(kind, value)
    if isinstance(bare, type) and issubclass(bare, msgspec.Struct) and isinstance(value, dict):
        for field in msgspec.structs.fields(bare):
            where = [*path, field.encode_name]
            if field.encode_name in value:
                yield from _violations(value[field.encode_name], field.type, where)
            elif field.required:
                yield Violation(".".join(where), "required", "is required")
    elif isinstance(value, dict) and (tagged := _tagged(bare)) is not None:
        yield from _tagged_violations(value, *tagged, path)
    elif get_origin(bare) is list and isinstance(value, list):
        longest, shortest = meta.get("max_length"), meta.get("min_length")
        if longest is not None and len(value) > longest:
            # Named once; its items are not looked into (there may be any number).
            yield _length("<=", "array", longest, path)
            return
        (item,) = get_args(bare)
        for index, element in enumerate(value):
            yield from _violations(element, item, [*path, str(index)])
        if shortest is not None and len(value) < shortest:
            yield _length(">=", "array", shortest, path)


def _tagged(kind: Any) -> tuple[str, dict[object, Any]] | None:
    """A union of tagged structs as its tag field and its members by tag; None for any
    other type."""
    if get_origin(kind) not in (Union, types.UnionType):
        return None
    members: dict[object, Any] = {}
    fields: set[str] = set()
    for member in get_args(kind):
        if not (isinstance(member, type) and issubclass(member, msgspec.Struct)):
            return None
        config = member.__struct_config__
        if config.tag is None or config.tag_field is None:
            return None
        fields.add(config.tag_field)
        members[config.tag] = member
    if len(fields) != 1:
        return None
    return fields.pop(), members


def _tagged_violations(
    value: dict[str, Any], tag_field: str, members: dict[object, Any], path: list[str]
) -> Iterator[Violation]:
    """The violations of an object meant as one of a tagged union's structs: its tag's, or,
    with a known tag, its fields' as that struct (every one, not msgspec's first)."""
    where = ".".join([*path, tag_field])
    if tag_field not in value:
        yield Violation(where, "required", "is required")
    elif not isinstance(value[tag_field], str | int) or value[tag_field] not in members:
        listed = ", ".join(msgspec.json.encode(tag).decode() for tag in members)
        yield Violation(where, "enum", f"must be one of {listed}")
    else:
        yield from _violations(value, members[value[tag_field]], path)


def _unwrapped(kind: Any, value: Any) -> tuple[Any, dict[str, Any]]:
    """`kind` without Annotated (its constraints returned) and, for a value that is not
    null, without the `None` of an optional."""
    constraints: dict[str, Any] = {}
    while True:
        if get_origin(kind) is Annotated:
            kind, *extras = get_args(kind)
            for extra in extras:
                if isinstance(extra, msgspec.Meta):
                    constraints |= {
                        name: getattr(extra, name)
                        for name in ("min_length", "max_length", "pattern")
                        if getattr(extra, name) is not None
                    }
            continue
        if get_origin(kind) in (Union, types.UnionType) and value is not None:
            members = [m for m in get_args(kind) if m is not type(None)]
            if len(members) == 1:
                kind = members[0]
                continue
        return kind, constraints


def _described(problem: str, kind: Any, path: list[str]) -> Violation:
    """msgspec's `problem` with a value of `kind` at `path`, as a rule and its bound."""
    found = _AT.search(problem)
    if found is not None:
        path = [*path, *_segments(found["path"])]
        problem = problem[: found.start()]
    where = ".".join(path)
    if match := _REQUIRED.fullmatch(problem):
        return Violation(".".join([*path, match["name"]]), "required", "is required")
    if match := _EXPECTED.fullmatch(problem):
        names = [_TYPE_WORDS.get(name, "a valid value") for name in match["types"].split(" | ")]
        return Violation(where, "type", f"must be {' or '.join(names)}")
    if match := _BOUND.fullmatch(problem):
        rule, template = _COMPARISONS[match["op"]]
        return Violation(where, rule, template.format(match["bound"]))
    if match := _LENGTH.fullmatch(problem):
        return _length(match["op"], match["kind"], int(match["n"]), path)
    if problem.startswith("Expected `str` matching regex"):
        pattern = _unwrapped(kind, "")[1].get("pattern")
        described = "the schema's pattern" if pattern is None else f"the pattern {pattern}"
        return Violation(where, "pattern", f"must match {described}")
    if problem.startswith("Object contains unknown field"):
        return Violation(where, "unknown", "must have no field the schema does not define")
    if problem.startswith("Invalid enum value"):
        allowed = _allowed(kind)
        listed = ", ".join(allowed) if allowed else "the values given in the schema"
        return Violation(where, "enum", f"must be one of {listed}")
    if problem.startswith("Invalid RFC3339 encoded datetime"):
        return Violation(where, "format", f"must be {_TYPE_WORDS['datetime']}")
    if problem.startswith("Invalid RFC3339 encoded date"):
        return Violation(where, "format", f"must be {_TYPE_WORDS['date']}")
    if problem.startswith("Invalid UUID"):
        return Violation(where, "format", f"must be {_TYPE_WORDS['uuid']}")
    if problem.startswith(("Number out of range", "Integer value out of range")):
        return Violation(where, "type", "must be a number within range")
    return Violation(where, "invalid", "is invalid")


def _length(op: str, kind: str, bound: int, path: list[str]) -> Violation:
    unit = ("character" if kind == "str" else "item") + ("" if bound == 1 else "s")
    if op == ">=":
        return Violation(".".join(path), "too_short", f"must have at least {bound} {unit}")
    return Violation(".".join(path), "too_long", f"must have at most {bound} {unit}")


def _segments(path: str) -> list[str]:
    """msgspec's `.name[3]` path as segments; anything after a segment it does not know (a
    dict's key, `[...]`) is left off rather than guessed at."""
    segments: list[str] = []
    position = 0
    while match := _SEGMENT.match(path, position):
        segments.append(match["name"] or match["index"])
        position = match.end()
    return segments


def _allowed(kind: Any) -> list[str]:
    """The values an enumeration or literal `kind` allows, as JSON text."""
    bare, _ = _unwrapped(kind, object())
    if get_origin(bare) is Literal:
        return [msgspec.json.encode(v).decode() for v in get_args(bare)]
    if isinstance(bare, type) and issubclass(bare, enum.Enum):
        return [msgspec.json.encode(member.value).decode() for member in bare]
    return []
