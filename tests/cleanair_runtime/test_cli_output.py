"""What `cleanair` prints never lets data or arguments drive the operator's terminal.

Connection names are any text an API client chose; names, labels, paths and error messages
echo operator input. Every such value is shown with its non-printable characters escaped,
while the CLI's own tabs and newlines stay. The CLI runs in process over a temporary SQLite
file, as in test_cli_wifi.py.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cleanair_core.access.accounts import Owner, OwnerKind
from cleanair_core.access.connections import new_connection
from cleanair_core.access.scopes import USER_SCOPES
from cleanair_core.service import CleanAir
from cleanair_runtime import cli
from cleanair_runtime.composition.bootstrap import open_deployment
from cleanair_runtime.composition.settings import Settings
from cleanair_runtime.terminal import escape_nonprintable, natural_key
from support.networks import grid

#: ESC-sequences that clear the screen and home the cursor, a carriage return that lets the
#: rest overwrite the line, BEL, a right-to-left override, 8-bit CSI, DEL, a line separator.
HOSTILE = "\x1b[2J\x1b[H\rok\x07\u202eevil\x9b\x7f\u2028"
HOSTILE_SHOWN = r"\x1b[2J\x1b[H\rok\x07\u202eevil\x9b\x7f\u2028"
#: What the undecodable byte 0x9b (8-bit CSI) in argv becomes in Python; printed through
#: surrogateescape it would reach the terminal as that raw byte.
UNDECODABLE = "\udc9b"


def unsafe_characters(text: str) -> list[str]:
    """Characters that must never reach a terminal: C0 (bar tab and newline), DEL, C1, and
    anything else `str.isprintable()` rejects (bidi and format controls, separators)."""
    return [
        char
        for char in text
        if char not in "\t\n"
        and (ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F or not char.isprintable())
    ]


def assert_terminal_safe(*texts: str) -> None:
    for text in texts:
        assert unsafe_characters(text) == [], text


@contextmanager
def opened_core() -> Iterator[CleanAir]:
    """A core over the same database and key as the CLI's."""
    deployment = open_deployment(Settings.from_env(), with_sources=False)
    core = deployment.core
    try:
        yield core
    finally:
        deployment.close()


# -- the helper --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[2J", r"\x1b[2J"),
        ("a\rb", r"a\rb"),
        ("a\tb\nc", r"a\tb\nc"),
        ("\x00\x07\x7f\x85\x9b", r"\x00\x07\x7f\x85\x9b"),
        ("\u202eevil\u202c", r"\u202eevil\u202c"),
        ("\u2028\u2029\u200b\ufeff", r"\u2028\u2029\u200b\ufeff"),
        ("\U000e0041", r"\U000e0041"),  # a tag character, invisible
        ("\udcff", r"\udcff"),
        ("Jyväskylä 東京 ü", "Jyväskylä 東京 ü"),
        ("C:\\path", "C:\\path"),
        ("", ""),
    ],
)
def test_escape_nonprintable_examples(raw: str, shown: str) -> None:
    assert escape_nonprintable(raw) == shown


def test_escape_nonprintable_takes_any_value() -> None:
    assert escape_nonprintable(ValueError("no user \x1b[2J")) == r"no user \x1b[2J"
    assert escape_nonprintable(Path("/tmp/a\rb")) == r"/tmp/a\rb"


_ANY_CHARACTER = st.characters(exclude_categories=())  # surrogates included
_ESCAPE = re.compile(r"\\(x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8}|[tnr])")


def _unescape(shown: str) -> str:
    def one(match: re.Match[str]) -> str:
        body = match.group(1)
        return {"t": "\t", "n": "\n", "r": "\r"}.get(body) or chr(int(body[1:], 16))

    return _ESCAPE.sub(one, shown)


@given(st.text(_ANY_CHARACTER))
@example(HOSTILE)
def test_escaped_text_is_all_printable(raw: str) -> None:
    shown = escape_nonprintable(raw)
    assert shown.isprintable()
    assert escape_nonprintable(shown) == shown  # applying it twice changes nothing


@given(st.text(_ANY_CHARACTER).filter(str.isprintable))
@example("Jyväskylä")
def test_printable_text_passes_unchanged(raw: str) -> None:
    assert escape_nonprintable(raw) == raw


@given(st.text(_ANY_CHARACTER).filter(lambda text: "\\" not in text))
@example(HOSTILE)
def test_escaping_is_unambiguous_for_text_without_backslashes(raw: str) -> None:
    """Distinct names never look alike: the original comes back from what was shown."""
    assert _unescape(escape_nonprintable(raw)) == raw


# -- every command that echoes data ---------------------------------------------------------


def test_connections_list_escapes_connection_names(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with opened_core() as core:
        core.add_user("alice")
        # Pairing refuses control characters in names now; a database written before that
        # may still hold them, so two are stored as an older release did.
        for name in (HOSTILE, "tab\there\nnewline"):
            issued = new_connection(
                Owner(OwnerKind.USER, "alice"),
                "x",
                USER_SCOPES,
                environment=core.policy.environment,
                keys=core.keys,
                now=core.context.now(),
            )
            core.store.add_connection(attrs.evolve(issued.connection, name=name))
        core.redeem_pairing_code(core.create_pairing_code("alice"), "Jyväskylä app", "127.0.0.1")
        # What pairing still lets through is escaped too: format controls and separators.
        core.redeem_pairing_code(core.create_pairing_code("alice"), "\u202eevil\u2028", "::1")

    assert cli.main(["connections", "list", "alice"]) == 0

    out, err = capsys.readouterr()
    assert_terminal_safe(out, err)
    assert HOSTILE_SHOWN in out
    assert r"tab\there\nnewline" in out
    assert "Jyväskylä app" in out
    assert r"\u202eevil\u2028" in out
    lines = out.splitlines()
    assert lines[0] == "id\tname\tscopes\tcreated\trevoked"
    assert len(lines) == 5  # one per connection: a name's newline does not start a row
    assert all(line.count("\t") == 4 for line in lines)  # nor does its tab add a column


def test_usage_escapes_labels(
    database: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Labels come from the ledger; the core writes only vetted ones, but the CLI must not
    depend on that to keep the terminal safe."""
    with opened_core() as core:
        core.add_user("alice")
    labels = {f"client:{HOSTILE}": 3, "score": 1}
    monkeypatch.setattr(CleanAir, "usage_by_label", lambda self, user: labels)

    assert cli.main(["usage", "alice"]) == 0
    out, err = capsys.readouterr()
    assert_terminal_safe(out, err)
    assert f"client:{HOSTILE_SHOWN}\t3\n" in out
    assert "score\t1\n" in out

    assert cli.main(["usage", "alice", "--json"]) == 0
    out, err = capsys.readouterr()
    assert_terminal_safe(out, err)
    assert json.loads(out) == labels


def test_network_list_and_delete_escape_names_and_sources(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with opened_core() as core:
        network = attrs.evolve(grid(2, 2, name=HOSTILE), source=f"{HOSTILE}.osm.pbf")
        core.store.save_network(network)

    assert cli.main(["network", "list"]) == 0
    out, err = capsys.readouterr()
    assert_terminal_safe(out, err)
    rows = out.splitlines()
    assert len(rows) == 2
    assert rows[1].startswith(f"{HOSTILE_SHOWN}\t4\t4\t")
    assert f"\t{HOSTILE_SHOWN}.osm.pbf\t" in rows[1]

    assert cli.main(["network", "delete", HOSTILE]) == 0
    out, err = capsys.readouterr()
    assert_terminal_safe(out, err)
    assert out == f"deleted network {HOSTILE_SHOWN}\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["users", "set-premium", f"{HOSTILE}bob", "on"], f"no user {HOSTILE_SHOWN}bob"),
        (["pairing-code", f"{HOSTILE}bob"], f"no user {HOSTILE_SHOWN}bob"),
        (["connections", "list", f"{HOSTILE}bob"], f"no user {HOSTILE_SHOWN}bob"),
        (["usage", f"{HOSTILE}bob"], f"no user {HOSTILE_SHOWN}bob"),
        (["partners", "deactivate", HOSTILE], f"no partner {HOSTILE_SHOWN}"),
        (["partners", "connections", HOSTILE], f"no partner {HOSTILE_SHOWN}"),
        (["partners", "usage", HOSTILE], f"no partner {HOSTILE_SHOWN}"),
        (
            ["partners", "revoke", HOSTILE, "00000000-0000-4000-8000-000000000001"],
            f"no partner {HOSTILE_SHOWN}",
        ),
        (
            ["partners", "issue-token", HOSTILE, "--name", "n", "--scope", "aq:read"],
            f"no partner {HOSTILE_SHOWN}",
        ),
        (["network", "delete", HOSTILE], f"no network {HOSTILE_SHOWN}"),
        (["wifi", "import", f"/nonexistent/{HOSTILE}.csv"], HOSTILE_SHOWN),
        (["network", "import", f"/nonexistent/{HOSTILE}.pbf"], HOSTILE_SHOWN),
        (["wifi", "import", f"/nonexistent/{UNDECODABLE}.csv"], r"/nonexistent/\udc9b.csv"),
        (["network", "import", f"/nonexistent/{UNDECODABLE}.pbf"], r"/nonexistent/\udc9b.pbf"),
    ],
)
def test_error_messages_escape_the_arguments_they_echo(
    database: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert cli.main(argv) == 1
    out, err = capsys.readouterr()
    assert_terminal_safe(out, err)
    assert out == ""
    assert message in err
    assert err.startswith("cleanair: ")
    assert err.count("\n") == 1


def test_usage_errors_escape_the_arguments_argparse_echoes(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as raised:
        cli.main(["users", "add", "bob", HOSTILE])
    assert raised.value.code == 2
    out, err = capsys.readouterr()
    assert_terminal_safe(out, err)
    assert f"unrecognized arguments: {HOSTILE_SHOWN}" in err


def test_settings_errors_escape_values_and_keep_one_problem_per_line(
    database: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CLEANAIR_TRUSTED_PROXIES", HOSTILE)
    monkeypatch.setenv("CLEANAIR_DAILY_CREDITS", "lots")
    assert cli.main(["usage", "alice"]) == 2
    out, err = capsys.readouterr()
    assert_terminal_safe(out, err)
    lines = err.splitlines()
    assert lines[0] == "cleanair: invalid settings:"
    assert any(line.startswith("  CLEANAIR_TRUSTED_PROXIES: ") for line in lines)
    assert any(line.startswith("  CLEANAIR_DAILY_CREDITS: ") for line in lines)

    monkeypatch.delenv("CLEANAIR_TRUSTED_PROXIES")
    monkeypatch.delenv("CLEANAIR_DAILY_CREDITS")
    key_file = tmp_path / f"key{HOSTILE}"
    key_file.write_text("not hex")
    monkeypatch.setenv("CLEANAIR_SECRET_KEY_FILE", str(key_file))
    assert cli.main(["usage", "alice"]) == 2
    out, err = capsys.readouterr()
    assert_terminal_safe(out, err)
    assert f"key{HOSTILE_SHOWN}" in err


def test_ordinary_output_is_unchanged(database: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["users", "add", "alice"]) == 0
    assert cli.main(["partners", "add", "acme"]) == 0
    assert cli.main(["clients", "add", "my-app"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out == (
        "added user alice (premium)\nadded partner acme\nrecognised client label my-app\n"
    )


# -- names with a trailing newline --------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "exists"),
    [
        (["users", "add", "bob\n"], lambda core: core.store.get_user("bob\n") is not None),
        (["partners", "add", "acme\n"], lambda core: core.store.get_partner("acme\n") is not None),
        (["clients", "add", "app\n"], lambda core: core.store.is_client_label("app\n")),
    ],
)
def test_a_name_with_a_trailing_newline_is_refused_and_nothing_is_created(
    database: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    exists: Callable[[CleanAir], bool],
) -> None:
    assert cli.main(argv) == 1
    out, err = capsys.readouterr()
    assert_terminal_safe(out, err)
    assert out == ""
    assert err.startswith("cleanair: a ")
    with opened_core() as core:
        assert not exists(core)


def test_bob_with_a_newline_is_not_added_beside_bob(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["users", "add", "bob"]) == 0
    assert cli.main(["users", "add", "bob\n"]) == 1
    assert cli.main(["users", "set-premium", "bob\n", "off"]) == 1
    with opened_core() as core:
        assert core.store.get_user("bob\n") is None
        bob = core.store.get_user("bob")
        assert bob is not None
        assert bob.premium


@pytest.mark.parametrize("name", ["city\n", "\x1b[2Jcity", ".city", "_city", "a" * 65, "city name"])
def test_network_import_refuses_names_that_are_not_whole_names(
    database: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    pbf = tmp_path / "city.osm.pbf"
    pbf.write_bytes(b"not read: the name is checked first")
    assert cli.main(["network", "import", str(pbf), "--name", name]) == 1
    _, err = capsys.readouterr()
    assert "a network name is 1 to 64 characters" in err
    assert_terminal_safe(err)


def test_a_name_taken_from_the_file_is_checked_too(
    database: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pbf = tmp_path / "city\r.osm.pbf"
    pbf.write_bytes(b"not read: the name is checked first")
    assert cli.main(["network", "import", str(pbf)]) == 1
    assert "a network name is" in capsys.readouterr().err


# -- the order station ids are listed in


@given(st.lists(st.integers(min_value=0, max_value=10**30)), st.sampled_from(["openaq:", "", "x-"]))
def test_natural_key_orders_the_numbers_of_ids_as_numbers(numbers: list[int], prefix: str) -> None:
    ids = [f"{prefix}{n}" for n in numbers]
    assert sorted(ids, key=natural_key) == [f"{prefix}{n}" for n in sorted(numbers)]


@given(st.lists(st.text()), st.data())
def test_natural_key_is_a_total_order_on_any_text(texts: list[str], data: st.DataObject) -> None:
    """Any two keys compare (no int against str), only equal texts have equal keys, so the
    order is one whatever the input's."""
    ordered = sorted(texts, key=natural_key)
    assert sorted(data.draw(st.permutations(texts)), key=natural_key) == ordered
    for a, b in itertools.pairwise(ordered):
        assert natural_key(a) <= natural_key(b)
        assert (natural_key(a) == natural_key(b)) == (a == b)


@given(st.lists(st.text(alphabet=st.characters(blacklist_characters="0123456789"))))
def test_natural_key_leaves_text_without_digits_in_text_order(texts: list[str]) -> None:
    assert sorted(texts, key=natural_key) == sorted(texts)


@given(st.text(), st.integers(min_value=0, max_value=10**6), st.text(alphabet="0"))
def test_natural_key_tells_leading_zeros_apart_next_to_their_number(
    prefix: str, number: int, zeros: str
) -> None:
    padded, plain = f"{prefix}{zeros}{number}", f"{prefix}{number}"
    assert (natural_key(padded) == natural_key(plain)) == (padded == plain)
