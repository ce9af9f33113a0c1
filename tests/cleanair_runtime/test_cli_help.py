"""`cleanair --version`, and every option's help saying its default."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from importlib.metadata import version

import pytest

from cleanair_runtime import cli
from cleanair_runtime.cli.parser import build_parser


def parsers(
    parser: argparse.ArgumentParser, path: str = "cleanair"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from parsers(child, f"{path} {name}")


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"cleanair {version('cleanair')}\n"


def test_every_option_says_its_default() -> None:
    checked = 0
    for path, parser in parsers(build_parser()):
        shown = " ".join(parser.format_help().split())  # the wrapping undone
        for action in parser._actions:
            if not action.option_strings or action.default is argparse.SUPPRESS:
                continue  # positionals, --help, --version
            assert action.help, f"{path} {action.option_strings[0]} has no help"
            if action.required:
                continue  # no default to show
            checked += 1
            text = " ".join(parser._get_formatter()._expand_help(action).split())
            assert "default" in text, f"{path} {action.option_strings[0]}: {text}"
            assert text in shown
    assert checked >= 15


def test_a_flag_shows_off_and_a_value_shows_itself() -> None:
    help_of = {path: p.format_help() for path, p in parsers(build_parser())}
    assert "(default: 8000)" in help_of["cleanair serve"]
    assert "(default: 127.0.0.1)" in help_of["cleanair serve"]
    assert "(default: off)" in " ".join(help_of["cleanair usage"].split())


#: Positionals another change owns for now (the `credits grant` arm and parser).
def test_every_positional_and_command_has_help() -> None:
    checked = 0
    for path, parser in parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for choice in action._choices_actions:  # each command listed in the usage
                    assert choice.help, f"{path} {choice.dest} has no help"
                continue
            if action.option_strings:
                continue
            checked += 1
            assert action.help, f"{path} {action.dest} has no help"
            shown = " ".join(parser.format_help().split())
            assert " ".join(action.help.split()) in shown
    assert checked >= 20


def test_the_alerts_commands_are_listed_with_their_options() -> None:
    help_of = {path: " ".join(p.format_help().split()) for path, p in parsers(build_parser())}
    assert "alerts see every user's alert subscriptions, disable one" in help_of["cleanair"]
    for action in ("list", "show", "disable"):
        assert f" {action} " in help_of["cleanair alerts"]
    listing = help_of["cleanair alerts list"]
    assert "--user USER only this user's, oldest first (default: every user's, by id)" in listing
    assert "--status {active,disabled}" in listing
    assert "ID the subscription's id" in help_of["cleanair alerts show"]
    assert "--reason REASON why, for its owner" in help_of["cleanair alerts disable"]


def test_since_and_until_say_a_date_or_no_offset_is_utc() -> None:
    (evaluate,) = [p for path, p in parsers(build_parser()) if path == "cleanair stations evaluate"]
    shown = " ".join(evaluate.format_help().split())
    assert "an ISO 8601 date (its midnight) or date and time, in UTC unless it has an offset" in (
        shown
    )


def test_the_import_help_states_the_line_bound() -> None:
    from cleanair_sources.text_files import MAX_LINE_CHARS

    (station_import,) = [
        p for path, p in parsers(build_parser()) if path == "cleanair stations import"
    ]
    assert f"at most {MAX_LINE_CHARS:,} characters" in " ".join(
        station_import.format_help().split()
    )
