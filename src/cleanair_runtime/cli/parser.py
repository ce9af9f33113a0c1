"""The `cleanair` command line: its commands, options and help."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from cleanair_core.access.scopes import Scope
from cleanair_core.air.observations import (
    OBSERVED,
)
from cleanair_core.air.pollutants import Pollutant
from cleanair_runtime.cli.alerts import add_alert_commands
from cleanair_runtime.terminal import escape_nonprintable

if TYPE_CHECKING:
    from _typeshed import SupportsWrite


class _Help(argparse.HelpFormatter):
    """Every option's help ends with its default (a flag's is `off`); an option whose
    default is None says in its own words what happens without it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or action.required
            or "default" in text
            or default is None
            or default is argparse.SUPPRESS
        ):
            return text
        shown = (
            {False: "off", True: "on"}.get(default, default)
            if isinstance(default, bool)
            else default
        )
        # argparse %-formats help: a default holding % must come out as itself.
        return f"{text} (default: {str(shown).replace('%', '%%')})".lstrip()


class _Version(argparse.Action):
    """`--version`: looked up only when asked, so other commands start no slower."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(
            option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="print the version"
        )

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from importlib.metadata import version

        print(f"cleanair {version('cleanair')}")
        parser.exit()


class _Parser(argparse.ArgumentParser):
    """argparse echoes unrecognised arguments verbatim in its usage errors, and its help
    ignores a closed stdout."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Help)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        super().error(escape_nonprintable(message))

    def print_help(self, file: SupportsWrite[str] | None = None) -> None:
        # argparse's own drops a failed write: `--help | head -1` would exit 0, not 141.
        (sys.stdout if file is None else file).write(self.format_help())


def _concurrency(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a whole number") from None
    if not 1 <= value <= 64:
        raise argparse.ArgumentTypeError("must be between 1 and 64")
    return value


def _port(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a whole number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError("must be between 0 and 65535")
    return value


def _whole_number(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a whole number") from None


def _observed_pollutant(raw: str) -> Pollutant:
    if raw not in {p.value for p in OBSERVED}:
        raise argparse.ArgumentTypeError("must be one of pm25, pm10, no2, o3")
    return Pollutant(raw)


def _instant(raw: str) -> datetime:
    """An ISO 8601 date (its midnight) or date and time; UTC unless it has an offset."""
    try:
        value = datetime.fromisoformat(raw)
    except ValueError:
        raise argparse.ArgumentTypeError("must be an ISO 8601 date, or date and time") from None
    if value.tzinfo is None or value.utcoffset() is None:
        value = value.replace(tzinfo=UTC)
    return value


def _add_partner_commands(sub: argparse._SubParsersAction[_Parser]) -> None:
    partners = sub.add_parser("partners", help="manage partners").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    partners.add_parser("add", help="add an active partner").add_argument(
        "partner", help="the new partner's name"
    )
    partners.add_parser("list", help="every partner: name, active, created")
    issue = partners.add_parser(
        "issue-token",
        help="issue a partner token: printed once, on stdout; the connection id on stderr",
    )
    issue.add_argument("partner", help="the partner the token acts for")
    issue.add_argument("--name", required=True, help="the connection's name")
    issue.add_argument(
        "--scope",
        action="append",
        required=True,
        choices=[s.value for s in Scope],
        help="a scope the token carries (repeat for more)",
    )
    partners.add_parser(
        "deactivate", help="deactivate a partner; its tokens stop working at once"
    ).add_argument("partner", help="the partner's name")
    partners.add_parser(
        "connections", help="a partner's connections (never the token)"
    ).add_argument("partner", help="the partner's name")
    partner_revoke = partners.add_parser(
        "revoke", help="revoke one of a partner's connections at once"
    )
    partner_revoke.add_argument("partner", help="the partner's name")
    partner_revoke.add_argument(
        "connection_id", help="the connection's id (a UUID, from `partners connections`)"
    )
    partner_usage = partners.add_parser(
        "usage", help="this month's credits of a partner's pool by attribution label"
    )
    partner_usage.add_argument("partner", help="the partner's name")
    partner_usage.add_argument("--json", action="store_true", help="print {label: credits}")


def _add_station_commands(sub: argparse._SubParsersAction[_Parser]) -> None:
    stations = sub.add_parser("stations", help="monitoring stations and their observations")
    stations_sub = stations.add_subparsers(dest="action", required=True, metavar="ACTION")
    station_import = stations_sub.add_parser(
        "import",
        help="import hourly observations from OpenAQ-archive CSV files (plain or gzip) with "
        "the header location_id,sensors_id,location,datetime,lat,lon,parameter,units,value; "
        "all files in one transaction",
    )
    station_import.add_argument(
        "files",
        metavar="FILE",
        type=Path,
        nargs="+",
        help="an archive file (a regular file: no device or pipe; lines of at most "
        "4,096 characters)",
    )
    station_import.add_argument(
        "--locations",
        type=Path,
        help="a CSV file with the header location_id,location,lat,lon[,station_type,area_type]: "
        "the stations' names and types (default: none; names from the observation files)",
    )
    station_import.add_argument(
        "--replay",
        action="store_true",
        help="replay a past sample as if it were live: move every row's hour by one whole "
        "number of days (each value stays on its local hour) so the latest hour in the "
        "files ends at the last full hour, or less than a day before it; rows still older "
        "than CLEANAIR_OBSERVATION_RETENTION_DAYS are left out, with a message",
    )
    stations_sub.add_parser(
        "list", help="every station: id, name, place, types, observations and their span"
    ).add_argument("--json", action="store_true", help="print a JSON array")
    stations_sub.add_parser(
        "prune", help="delete observations older than CLEANAIR_OBSERVATION_RETENTION_DAYS now"
    )
    evaluate = stations_sub.add_parser(
        "evaluate",
        help="the service's own error: each station's hours predicted without it (raw "
        "background, fused, inverse distance): n, mean bias, RMSE, r, FAC2",
    )
    evaluate.add_argument(
        "--pollutant",
        type=_observed_pollutant,
        help="pm25, pm10, no2 or o3 (default: every one observed)",
    )
    evaluate.add_argument(
        "--since",
        type=_instant,
        help="first hour end: an ISO 8601 date (its midnight) or date and time, in UTC "
        "unless it has an offset (default: all)",
    )
    evaluate.add_argument(
        "--until",
        type=_instant,
        help="last hour end: an ISO 8601 date (its midnight) or date and time, in UTC "
        "unless it has an offset (default: all)",
    )
    evaluate.add_argument("--json", action="store_true", help="print a JSON array")


def build_parser() -> argparse.ArgumentParser:  # noqa: PLR0915 - statements a command
    """The parser of every `cleanair` command."""
    parser = _Parser(
        prog="cleanair",
        description="Operate cleanair: serve the API and manage users, partners and pairing.",
        epilog="Settings come from CLEANAIR_* environment variables (see README).",
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser("serve", help="start the HTTP API")
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    serve.add_argument("--port", type=_port, default=8000, help="0-65535 (0: any free port)")
    serve.add_argument(
        "--workers",
        type=_concurrency,
        default=1,
        help="API processes sharing the port and the database (1-64)",
    )

    worker = sub.add_parser(
        "worker", help="run route-plan workers with no HTTP, until SIGTERM or SIGINT"
    )
    worker.add_argument(
        "--concurrency", type=_concurrency, default=2, help="plans worked on at once (1-64)"
    )

    users = sub.add_parser("users", help="manage users").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    add = users.add_parser("add", help="add a user (premium unless --no-premium)")
    add.add_argument("user", help="the new user's name")
    add.add_argument(
        "--premium",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the user's premium plan (pairing needs it)",
    )
    users.add_parser("list", help="every user: name, premium, created")
    premium = users.add_parser("set-premium", help="turn a user's premium plan on or off")
    premium.add_argument("user", help="the user's name")
    premium.add_argument("state", choices=["on", "off"], help="on or off")

    code = sub.add_parser("pairing-code", help="print a 6-digit pairing code for a premium user")
    code.add_argument("user", help="the premium user the code pairs an app with")

    connections = sub.add_parser("connections", help="list or revoke connections")
    conn_sub = connections.add_subparsers(dest="action", required=True, metavar="ACTION")
    conn_sub.add_parser("list", help="a user's connections (never the token)").add_argument(
        "user", help="the user's name"
    )
    conn_sub.add_parser("revoke", help="revoke a connection at once").add_argument(
        "connection_id", help="the connection's id (a UUID, from `connections list`)"
    )

    _add_partner_commands(sub)

    clients = sub.add_parser("clients", help="recognised `client` labels").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    clients.add_parser("add", help="recognise a client label").add_argument(
        "label", help="the label apps send as `client`"
    )

    credits = sub.add_parser("credits", help="see or adjust a user's credit pool (support)")
    credits_sub = credits.add_subparsers(dest="action", required=True, metavar="ACTION")
    show = credits_sub.add_parser(
        "show", help="a user's quota this month (as GET /v1/quota says it), grants, usage"
    )
    show.add_argument("user", help="the user's name")
    show.add_argument("--json", action="store_true", help="print it as one JSON object")
    grant = credits_sub.add_parser(
        "grant",
        help="add N credits to a user's pool for this month only, recorded in the ledger "
        "with the reason; the daily burst cap still applies (unless --today)",
    )
    grant.add_argument("user", help="the user whose credit pool gets them")
    grant.add_argument(
        "credits", type=_whole_number, metavar="N", help="how many credits (a whole number)"
    )
    grant.add_argument("--reason", required=True, help="why (kept in the ledger)")
    grant.add_argument(
        "--today",
        action="store_true",
        help="raise today's (UTC) daily burst cap by N instead of the month's pool: the user "
        "may spend more today, still within what remains of this month",
    )

    usage = sub.add_parser("usage", help="this month's credits by attribution label")
    usage.add_argument("user", help="the user's name")
    usage.add_argument("--json", action="store_true", help="print {label: credits}")

    wifi = sub.add_parser("wifi", help="Wi-Fi access points for local geolocation")
    wifi_sub = wifi.add_subparsers(dest="action", required=True, metavar="ACTION")
    wifi_sub.add_parser(
        "import",
        help="import access points from a CSV file with the header bssid,lat,lon[,accuracy_m]; "
        "only a keyed hash of each BSSID is stored",
    ).add_argument("file", type=Path, help="the CSV file")

    _add_station_commands(sub)
    add_alert_commands(sub)

    network = sub.add_parser("network", help="street networks for route planning")
    network_sub = network.add_subparsers(dest="action", required=True, metavar="ACTION")
    network_import = network_sub.add_parser(
        "import", help="import an OpenStreetMap .osm.pbf file as a routable street network"
    )
    network_import.add_argument("file", type=Path, help="the .osm.pbf file")
    network_import.add_argument(
        "--name", help="the network's name (default: the file name); replaces a namesake"
    )
    network_sub.add_parser("list", help="the stored street networks")
    network_sub.add_parser("delete", help="delete a stored network").add_argument(
        "name", help="the network's name, as `network list` shows it"
    )
    return parser
