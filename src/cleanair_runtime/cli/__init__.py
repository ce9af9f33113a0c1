"""`cleanair`: the operator CLI. It works on the same database as a running server."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import attrs

from cleanair_core.access.connections import Connection
from cleanair_core.access.scopes import Scope, format_scopes
from cleanair_core.air.fusion_evaluation import PollutantEvaluation, rmse_ratios
from cleanair_core.air.observations import (
    OBSERVED,
    Observation,
    ObservationsWritten,
    Station,
)
from cleanair_core.air.pollutants import Pollutant
from cleanair_core.air.retention import (
    DAY,
    days_to_keep,
    last_full_hour,
    replay_shift,
    retention_cutoff,
)
from cleanair_core.air.screening import UPPER_BOUNDS, ObservationImport, held_back
from cleanair_core.air.wifi_location import (
    IMPORT_BATCH_SIZE,
    PROGRESS_EVERY_ROWS,
    ImportReport,
)
from cleanair_core.errors import OperatorError, StoreUnavailable
from cleanair_core.routes.network import validate_network_name
from cleanair_core.service import CleanAir
from cleanair_core.use_cases.credits import PoolReport
from cleanair_runtime.cli.alerts import add_alert_commands, run_alert_command
from cleanair_runtime.composition.bootstrap import open_deployment
from cleanair_runtime.composition.settings import Settings, SettingsError
from cleanair_runtime.terminal import escape_nonprintable, natural_key, quiet_on_closed_pipe
from cleanair_storage.errors import SchemaTooNew

if TYPE_CHECKING:  # imported where used: other commands start without the archive reader
    from _typeshed import SupportsWrite

    from cleanair_sources.openaq_archive import ArchiveTally


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


def _parser() -> argparse.ArgumentParser:  # noqa: PLR0915 - statements a command
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


def _when(value: object) -> str:
    return "-" if value is None else value.isoformat(timespec="seconds")  # type: ignore[attr-defined]


def _import_wifi(core: CleanAir, path: Path) -> int:
    """Stream `path` into the store in batches; progress and skipped rows go to stderr. Exit
    status 1 when no row was valid: a wrong file, or a wrong column, is not a success."""
    report = ImportReport()

    def progress(done: ImportReport) -> None:
        print(
            f"cleanair: {done.rows} rows read, {done.imported} access points imported",
            file=sys.stderr,
            flush=True,
        )

    from cleanair_sources.text_files import bounded_lines, check_regular

    check_regular(path)
    try:
        # utf-8-sig drops the byte-order mark spreadsheets write; newline="" is what csv wants.
        with path.open(encoding="utf-8-sig", newline="") as handle:
            core.import_access_points(
                bounded_lines(str(path), handle, "access point row"),
                report=report,
                batch_size=IMPORT_BATCH_SIZE,
                on_progress=progress,
                progress_every=PROGRESS_EVERY_ROWS,
            )
    except FileNotFoundError:
        raise OperatorError(f"no such file: {path}") from None
    except OSError as exc:
        raise OperatorError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise OperatorError(
            f"{path} is not UTF-8 text; stopped after {report.rows} rows, "
            f"{report.imported} access points were imported"
        ) from None
    print(f"imported {report.imported} access points, skipped {report.skipped} rows")
    for error in report.first_errors:  # line numbers and reasons only, never a BSSID
        print(f"cleanair: line {error.line}: {escape_nonprintable(error.reason)}", file=sys.stderr)
    if report.skipped > len(report.first_errors):
        print(
            f"cleanair: ... and {report.skipped - len(report.first_errors)} more skipped rows",
            file=sys.stderr,
        )
    if report.imported == 0:
        print(f"cleanair: no valid row in {escape_nonprintable(path)}", file=sys.stderr)
        return 1
    return 0


class _Progress:
    """Prints how far an import got, on stderr: every `every_rows` rows, and at least once
    a `every_seconds` in between when rows come slowly (big gzip files, a slow disk)."""

    def __init__(
        self,
        every_rows: int,
        every_seconds: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._every_rows = every_rows
        self._every_seconds = every_seconds
        self._clock = clock
        self._next_rows = every_rows
        self._last = clock()

    def due(self, rows: int) -> bool:
        """Whether to print now, `rows` having been read; marks it printed when so."""
        now = self._clock()
        if rows < self._next_rows and now - self._last < self._every_seconds:
            return False
        self._next_rows = (rows // self._every_rows + 1) * self._every_rows
        self._last = now
        return True


def _import_stations(
    core: CleanAir, files: list[Path], locations: Path | None, replay: bool = False
) -> int:
    """Read and check every file, then write what passed in one transaction: a file that
    cannot be read (exit 2) writes nothing, and the database is locked only while writing.
    What the retention will do to the rows (and `replay`'s shift) is told before writing."""
    from cleanair_runtime.cli.spool import Spool
    from cleanair_sources.openaq_archive import (
        ArchiveFileError,
        ArchiveParser,
        ArchiveTally,
        check_readable,
        read_archive,
        read_locations,
    )

    tally = ArchiveTally()
    progress = _Progress(PROGRESS_EVERY_ROWS)
    # Observations per hour end: a year of hours is some 9,000 keys whatever the rows, and
    # enough to count the rows any shift leaves older than the retention.
    hours: Counter[datetime] = Counter()

    def read_so_far(done: ArchiveTally) -> None:
        if progress.due(done.rows):
            print(
                f"cleanair: {done.rows} rows read, {done.accepted} accepted, "
                f"{done.rejected_total} rejected",
                file=sys.stderr,
                flush=True,
            )

    def written_so_far(stations: int, written: ObservationsWritten) -> None:
        done = written.added + written.replaced + written.unchanged
        if progress.due(done):
            print(f"cleanair: {done} of {tally.accepted} observations written", file=sys.stderr)

    read_at = core.clock.now()

    def counted(items: Iterator[Station | Observation]) -> Iterator[Station | Observation]:
        # Only what the screening keeps: one row dated years ahead would otherwise set the
        # replay's shift and move every real row out of the retention.
        for item in items:
            if isinstance(item, Observation) and held_back(item, read_at) is None:
                hours[item.hour_end] += 1
            yield item

    with Spool[Station | Observation]() as spool:
        try:
            check_readable([*files, *([] if locations is None else [locations])])
            known = None if locations is None else read_locations(locations, tally)
            parser = ArchiveParser(known, tally, on_progress=read_so_far, progress_every=1_000)
            spool.extend(counted(read_archive(files, parser)))
        except ArchiveFileError as exc:
            print(f"cleanair: {escape_nonprintable(exc)}; nothing was imported", file=sys.stderr)
            return 2
        now = core.clock.now()
        shift = replay_shift(max(hours), now) if replay and hours else timedelta(0)
        if replay and hours:
            print(
                f"cleanair: replaying: every row's hour moved by {shift // DAY} days, so the "
                f"latest ends at {_when(max(hours) + shift)} (the last full hour is "
                f"{_when(last_full_hour(now))})",
                file=sys.stderr,
            )
        cutoff = retention_cutoff(now, core.policy.observation_retention_seconds)
        old = 0 if cutoff is None else sum(n for h, n in hours.items() if h + shift < cutoff)
        if old:
            _warn_retention(old, min(hours) + shift, now, core, dropping=replay)
        progress = _Progress(IMPORT_BATCH_SIZE)
        done = core.import_observations(
            _shifted(spool, shift, cutoff if replay else None),
            chunk_size=IMPORT_BATCH_SIZE,
            on_chunk=written_so_far,
        )
    _report_import(done, tally, now)
    empty = [file.name for file in tally.files if not file.valid]
    for name in empty:
        print(f"cleanair: {escape_nonprintable(name)} has no valid row", file=sys.stderr)
    return 1 if empty else 0


def _shifted(
    items: Iterable[Station | Observation], shift: timedelta, drop_before: datetime | None
) -> Iterator[Station | Observation]:
    """`items` with every observation's hour moved by `shift`, less those whose moved hour
    ends before `drop_before` (when given)."""
    for item in items:
        if not isinstance(item, Observation):
            yield item
            continue
        hour_end = item.hour_end + shift
        if drop_before is not None and hour_end < drop_before:
            continue
        yield attrs.evolve(item, hour_end=hour_end) if shift else item


def _report_import(done: ObservationImport, tally: ArchiveTally, now: datetime) -> None:
    """What an import did, on stdout, and why rows were not stored, on stderr."""
    written, held = done.written, done.held_back
    print(
        f"imported {done.stations} stations; observations: {written.added} added, "
        f"{written.replaced} replaced, {written.unchanged} unchanged; "
        f"held back {held.total} (over the pollutant's upper bound: {held.over_bound}, "
        f"hour in the future: {held.future}); "
        f"rows: {tally.rows} read, {tally.rejected_total} rejected, "
        f"{sum(tally.ignored.values())} ignored"
    )
    if held.over_bound:
        bounds = ", ".join(f"{p.value} {b:,.0f}" for p, b in UPPER_BOUNDS.items())
        print(
            f"cleanair: held back {held.over_bound} observations over their pollutant's upper "
            f"bound (µg/m³: {bounds}; docs/science.md, Screening observations): not stored",
            file=sys.stderr,
        )
    if held.future:
        print(
            f"cleanair: held back {held.future} observations whose hour ends after now "
            f"({_when(now)}): not stored",
            file=sys.stderr,
        )
    # Counts, reasons, files and line numbers only: a cell could hold anything.
    for reason, count in sorted(tally.rejected.items()):
        print(f"cleanair: rejected {count} rows: {reason}", file=sys.stderr)
    for ignored, count in sorted(tally.ignored.items()):
        print(f"cleanair: ignored {count} rows: {ignored}", file=sys.stderr)
    for error in tally.first_errors:
        where = escape_nonprintable(error.file)
        print(f"cleanair: {where}, line {error.line}: {error.reason}", file=sys.stderr)
    if tally.rejected_total > len(tally.first_errors):
        more = tally.rejected_total - len(tally.first_errors)
        print(f"cleanair: ... and {more} more rejected rows", file=sys.stderr)


def _warn_retention(
    old: int, oldest: datetime, now: datetime, core: CleanAir, *, dropping: bool
) -> None:
    """Say, before anything is written, how many observations end before the retention and
    what becomes of them, and how to keep them."""
    days = core.policy.observation_retention_seconds // 86_400
    fate = (
        "they are left out of this replay"
        if dropping
        else "they are imported now and deleted by the next prune (an API process's start or "
        "hourly upkeep, or `cleanair stations prune`)"
    )
    print(
        f"cleanair: {old} observations end more than {days} days ago, the retention "
        f"(CLEANAIR_OBSERVATION_RETENTION_DAYS): {fate}; to keep them, set "
        f"CLEANAIR_OBSERVATION_RETENTION_DAYS to 0 (for ever) or to at least "
        f"{days_to_keep(oldest, now)} days, for this command and the servers"
        f"{'' if dropping else ' (or move them to the present with --replay)'}",
        file=sys.stderr,
        flush=True,
    )


def _list_stations(core: CleanAir, as_json: bool) -> None:
    # The store orders ids as text (openaq:10 before openaq:2); an operator reads numbers.
    summaries = sorted(core.station_summaries(), key=lambda s: natural_key(s.station.id))
    if as_json:
        print(
            json.dumps(
                [
                    {
                        "id": s.station.id,
                        "name": s.station.name,
                        "lat": s.station.point.lat,
                        "lon": s.station.point.lon,
                        "station_type": s.station.station_type,
                        "area_type": s.station.area_type,
                        "observations": s.observations,
                        "first_hour_end": _iso_or_none(s.first_hour_end),
                        "last_hour_end": _iso_or_none(s.last_hour_end),
                    }
                    for s in summaries
                ]
            )
        )
        return
    print("id\tname\tlat\tlon\ttype\tarea\tobservations\tfirst hour end\tlast hour end")
    for s in summaries:
        station = s.station
        print(
            f"{escape_nonprintable(station.id)}\t{escape_nonprintable(station.name)}\t"
            f"{station.point.lat:.5f}\t{station.point.lon:.5f}\t{station.station_type or '-'}\t"
            f"{station.area_type or '-'}\t{s.observations}\t{_when(s.first_hour_end)}\t"
            f"{_when(s.last_hour_end)}"
        )


def _evaluate_stations(
    core: CleanAir,
    pollutant: Pollutant | None,
    since: datetime | None,
    until: datetime | None,
    as_json: bool,
) -> int:
    import asyncio

    def fitting(step: str) -> None:
        print(f"cleanair: {step}", file=sys.stderr, flush=True)

    evaluations = asyncio.run(
        core.evaluate_stations(
            pollutants=(pollutant,) if pollutant else OBSERVED,
            since=since,
            until=until,
            progress=fitting,
        )
    )
    if not evaluations:
        print(f"cleanair: {_nothing_to_evaluate(core, pollutant, since, until)}", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps([_evaluation_json(e) for e in evaluations]))
        return 0
    for evaluation in evaluations:
        print(
            f"{evaluation.pollutant.value}: {evaluation.stations} stations, {evaluation.hours} "
            f"hours, {evaluation.observations} observations (µg/m³; leave one station out)"
        )
        print("  group\tmethod\tn\tmean bias\tRMSE\tr\tFAC2\t90% interval coverage")
        for row in evaluation.rows:
            st = row.statistics
            coverage = "-" if math.isnan(st.coverage) else f"{st.coverage:.3f}"
            print(
                f"  {row.group}\t{row.method}\t{st.n}\t{st.mean_bias:.2f}\t{st.rmse:.2f}\t"
                f"{st.r:.3f}\t{st.fac2:.3f}\t{coverage}"
            )
        ratios = rmse_ratios(evaluation.rows)
        print(
            f"  fused RMSE: {ratios['fused/background']:.2f}x the background's, "
            f"{ratios['fused/idw']:.2f}x inverse distance's"
        )
    return 0


def _nothing_to_evaluate(
    core: CleanAir, pollutant: Pollutant | None, since: datetime | None, until: datetime | None
) -> str:
    """Why `stations evaluate` found nothing: no observations at all, or none of those asked
    for, with the window asked and the span of what is stored."""
    stored = [s for s in core.station_summaries() if s.observations]
    first = min((s.first_hour_end for s in stored if s.first_hour_end), default=None)
    last = max((s.last_hour_end for s in stored if s.last_hour_end), default=None)
    if first is None or last is None:
        return "no stored observations to evaluate"
    window = {
        (True, True): f" whose hour ends from {_when(since)} to {_when(until)}",
        (True, False): f" whose hour ends at {_when(since)} or later",
        (False, True): f" whose hour ends at {_when(until)} or earlier",
        (False, False): "",
    }[since is not None, until is not None]
    which = f"{pollutant.value} " if pollutant else ""
    return (
        f"no stored {which}observations{window} to evaluate; the stored observations (every "
        f"pollutant) end from {_when(first)} to {_when(last)}"
    )


def _evaluation_json(evaluation: PollutantEvaluation) -> dict[str, object]:
    def number(value: float) -> float | None:
        return None if math.isnan(value) else value

    return {
        "pollutant": evaluation.pollutant.value,
        "stations": evaluation.stations,
        "hours": evaluation.hours,
        "observations": evaluation.observations,
        "rows": [
            {
                "group": row.group,
                "method": row.method,
                "n": row.statistics.n,
                "mean_bias": number(row.statistics.mean_bias),
                "rmse": number(row.statistics.rmse),
                "r": number(row.statistics.r),
                "fac2": number(row.statistics.fac2),
                "coverage": number(row.statistics.coverage),
            }
            for row in evaluation.rows
        ],
    }


def _iso_or_none(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat(timespec="seconds")


def _prune_stations(core: CleanAir) -> None:
    seconds = core.policy.observation_retention_seconds
    if not seconds:
        print("deleted 0 observations (CLEANAIR_OBSERVATION_RETENTION_DAYS is 0: kept for ever)")
        return
    deleted = core.prune_observations()
    print(f"deleted {deleted} observations older than {seconds // 86_400} days")


def _import_network(core: CleanAir, path: Path, name: str | None) -> None:
    """Read `path` with pyosmium and store the network; progress goes to stderr."""
    from cleanair_sources.osm_import import import_network

    if not path.is_file():
        raise OperatorError(f"no such file: {path}")
    name = validate_network_name(name or path.name.split(".")[0])
    started = time.monotonic()

    def progress(stage: str, count: int) -> None:
        print(f"cleanair: {escape_nonprintable(stage)}: {count:,}", file=sys.stderr, flush=True)

    network = import_network(path, name, progress, core.clock.now())
    core.save_network(network)
    print(
        f"imported network {escape_nonprintable(network.name)}: {network.node_count:,} nodes, "
        f"{network.edge_count:,} edges in {time.monotonic() - started:.1f} s"
    )


def _list_connections(listed: list[Connection]) -> None:
    print("id\tname\tscopes\tcreated\trevoked")
    for c in listed:
        scopes = ",".join(format_scopes(c.scopes))
        # Any text an API client chose, tabs and newlines included: escaped, so it can
        # neither draw over the terminal nor break the table's rows and columns.
        name = escape_nonprintable(c.name)
        print(f"{c.id}\t{name}\t{scopes}\t{_when(c.created_at)}\t{_when(c.revoked_at)}")


def _list_users(core: CleanAir) -> None:
    print("name\tpremium\tcreated")
    for user in core.users():
        premium = "on" if user.premium else "off"  # as `users set-premium` takes it
        print(f"{escape_nonprintable(user.name)}\t{premium}\t{_when(user.created_at)}")


def _list_partners(core: CleanAir) -> None:
    print("name\tactive\tcreated")
    for partner in core.partners():
        active = "yes" if partner.active else "no"
        print(f"{escape_nonprintable(partner.name)}\t{active}\t{_when(partner.created_at)}")


def _print_usage(usage: dict[str, int], as_json: bool, owner: str) -> None:
    if as_json:
        # ensure_ascii escapes everything outside printable ASCII, DEL included.
        print(json.dumps(usage, sort_keys=True))
    elif not usage:  # an empty answer would look like a command that did nothing
        print(f"no credits used this month by {escape_nonprintable(owner)}")
    else:
        for label, credits in sorted(usage.items()):
            print(f"{escape_nonprintable(label)}\t{credits}")


def _print_pool(report: PoolReport, as_json: bool) -> None:
    quota = report.quota
    if as_json:
        print(
            json.dumps(
                {
                    "quota": attrs.asdict(quota),
                    "grants": [
                        {
                            "credits": g.amount,
                            "at": _when(g.at),
                            "reason": g.reason,
                            # The window it raised: a month's pool or (a day grant) a day's cap.
                            "for": g.day if g.is_day_grant else g.month,
                        }
                        for g in report.grants
                    ],
                    "usage": report.by_label,
                },
                sort_keys=True,
            )
        )
        return
    granted = sum(g.amount for g in report.grants if not g.is_day_grant)
    today = sum(g.amount for g in report.grants if g.is_day_grant and g.day == report.day)
    print(f"month\tused {quota.used}\tlimit {quota.limit}\tremaining {quota.remaining}")
    print(
        f"day\tused {quota.daily_used}\tlimit {quota.daily_limit}"
        f"\tremaining {quota.daily_remaining}"
    )
    print(f"granted this month\t{granted}")
    print(f"granted today\t{today}")
    for g in report.grants:
        kind = "day grant" if g.is_day_grant else "grant"
        print(f"{kind}\t{g.amount}\t{_when(g.at)}\t{escape_nonprintable(g.reason or '')}")
    for label, used in sorted(report.by_label.items()):
        print(f"usage\t{escape_nonprintable(label)}\t{used}")


def _connection_id(raw: str) -> uuid.UUID:
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise OperatorError("a connection id is a UUID") from None


def _list_networks(core: CleanAir) -> None:
    print("name\tnodes\tedges\tsouth,west,north,east\tsource\timported")
    for n in core.network_summaries():
        bounds = ",".join(f"{v:.5f}" for v in n.bounds)
        name, source = escape_nonprintable(n.name), escape_nonprintable(n.source)
        print(f"{name}\t{n.nodes}\t{n.edges}\t{bounds}\t{source}\t{_when(n.imported_at)}")


def _run(core: CleanAir, args: argparse.Namespace) -> int:  # noqa: PLR0912, PLR0915 - an arm a command
    """Run one command; its exit status when it can be other than 0."""
    match args.command, getattr(args, "action", None):
        case "users", "add":
            user = core.add_user(args.user, premium=args.premium)
            plan = "premium" if user.premium else "not premium"
            print(f"added user {escape_nonprintable(user.name)} ({plan})")
        case "users", "list":
            _list_users(core)
        case "users", "set-premium":
            core.set_premium(args.user, args.state == "on")
            print(f"premium {args.state} for {escape_nonprintable(args.user)}")
        case "pairing-code", _:
            print(escape_nonprintable(core.create_pairing_code(args.user)))
        case "connections", "list":
            _list_connections(core.connections_of_user(args.user))
        case "connections", "revoke":
            connection_id = _connection_id(args.connection_id)
            core.revoke_connection(connection_id)
            print(f"revoked {connection_id}")
        case "partners", "add":
            core.add_partner(args.partner)
            print(f"added partner {escape_nonprintable(args.partner)}")
        case "partners", "issue-token":
            issued = core.issue_partner_token(
                args.partner, args.name, [Scope(s) for s in args.scope]
            )
            # The token alone on stdout, as scripts capture it; shown this once, never again.
            print(escape_nonprintable(issued.token))
            print(
                f"cleanair: connection {issued.connection.id} (the token is shown only now; "
                f"revoke it with `cleanair partners revoke {escape_nonprintable(args.partner)} "
                f"{issued.connection.id}`)",
                file=sys.stderr,
            )
        case "partners", "deactivate":
            core.deactivate_partner(args.partner)
            print(f"deactivated partner {escape_nonprintable(args.partner)}")
        case "partners", "list":
            _list_partners(core)
        case "partners", "connections":
            _list_connections(core.connections_of_partner(args.partner))
        case "partners", "revoke":
            connection_id = _connection_id(args.connection_id)
            core.revoke_partner_connection(args.partner, connection_id)
            print(f"revoked {connection_id}")
        case "partners", "usage":
            _print_usage(core.partner_usage_by_label(args.partner), args.json, args.partner)
        case "clients", "add":
            core.add_client_label(args.label)
            print(f"recognised client label {escape_nonprintable(args.label)}")
        case "credits", "show":
            _print_pool(core.pool_report(args.user), args.json)
        case "credits", "grant":
            report = core.grant_credits(args.user, args.credits, args.reason, today=args.today)
            quota = report.quota
            if args.today:
                print(
                    f"granted {args.credits} credits to {escape_nonprintable(args.user)} for "
                    f"today ({report.day} UTC): daily limit {quota.daily_limit}, daily "
                    f"remaining {quota.daily_remaining}; this month's remaining "
                    f"{quota.remaining} still applies"
                )
            else:
                print(
                    f"granted {args.credits} credits to {escape_nonprintable(args.user)} for "
                    f"this month: limit {quota.limit}, remaining {quota.remaining}"
                )
        case "usage", _:
            _print_usage(core.usage_by_label(args.user), args.json, args.user)
        case "wifi", "import":
            return _import_wifi(core, args.file)
        case "stations", "import":
            return _import_stations(core, args.files, args.locations, args.replay)
        case "stations", "evaluate":
            return _evaluate_stations(core, args.pollutant, args.since, args.until, args.json)
        case "stations", "list":
            _list_stations(core, args.json)
        case "stations", "prune":
            _prune_stations(core)
        case "network", "import":
            _import_network(core, args.file, args.name)
        case "network", "list":
            _list_networks(core)
        case "network", "delete":
            core.delete_network(args.name)
            print(f"deleted network {escape_nonprintable(args.name)}")
        case "alerts", _:
            return run_alert_command(core, args)
    return 0


#: The commands that may make a new SQLite database and key file (saying so on stderr): what
#: an operator runs first on a new machine. Every other command refuses when there is none:
#: run from another folder, the relative default `./var/cleanair.db` would otherwise be a
#: second, empty database with its own key, whose pairing codes the server answers with 401.
#: Not `worker`: a worker on a new, empty database would idle for ever, claiming none of the
#: API's plans.
CREATING = frozenset(
    {
        "serve",
        "users add",
        "partners add",
        "clients add",
        "wifi import",
        "network import",
        "stations import",
    }
)


def _command(args: argparse.Namespace) -> str:
    action = getattr(args, "action", None)
    return str(args.command) if action is None else f"{args.command} {action}"


def _check_database(settings: Settings, command: str) -> None:
    """Refuse (SettingsError) a command outside `CREATING` when the SQLite database or its
    key file does not exist; for one in `CREATING`, say on stderr what it is about to create,
    by absolute path, and make the folders for it."""
    if settings.uses_postgres or str(settings.database) == ":memory:":
        return
    given = Path(settings.database)
    database = given.absolute()
    key_file = None if settings.secret_key else settings.key_file.absolute()
    missing = [f"database {database}"] if not database.exists() else []
    if key_file is not None and not key_file.exists():
        missing.append(f"key file {key_file}")
    if database.is_dir():
        raise SettingsError(f"CLEANAIR_DATABASE: {database} is a folder, not a database file")
    if not missing:
        return
    if key_file is not None:
        from cleanair_runtime.composition.bootstrap import key_is_lost, lost_key

        if key_is_lost(database, key_file):
            raise lost_key(key_file)
    where = "" if given.is_absolute() else f" (CLEANAIR_DATABASE is relative to {Path.cwd()})"
    if command not in CREATING:
        raise SettingsError(
            f"no database at {database}{where}: run cleanair where its database is or set "
            "CLEANAIR_DATABASE (`cleanair users add` or `cleanair serve` makes a new one)"
        )
    for folder in {database.parent, *([] if key_file is None else [key_file.parent])}:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SettingsError(
                f"cannot create the folder {folder}: {exc.strerror or exc}"
            ) from None
    print(f"cleanair: creating a new {' and '.join(missing)}{where}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command `argv` (default: the process's arguments); its exit status. Output cut
    short by its reader (`| head`) ends the command quietly with 141 (`quiet_on_closed_pipe`)."""
    return quiet_on_closed_pipe(lambda: _main(argv))


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = Settings.from_env()
        if args.command == "serve":
            from cleanair_runtime.processes.server import serve

            # Checked (and the database's folder made) once the port is bound: a busy port
            # fails before anything is created.
            return serve(
                settings,
                args.host,
                args.port,
                args.workers,
                prepare=lambda: _check_database(settings, "serve"),
            )
        _check_database(settings, _command(args))
        if args.command == "worker":
            from cleanair_runtime.processes.worker import work

            return work(settings, args.concurrency)
        # Evaluating asks the air-quality source; every other command works on the store.
        evaluating = _command(args) == "stations evaluate"
        deployment = open_deployment(settings, with_sources=evaluating)
    except SettingsError as exc:
        # One bad setting per line: those line breaks are the CLI's own, the rest is escaped.
        lines = (escape_nonprintable(line) for line in str(exc).split("\n"))
        print("cleanair: " + "\n".join(lines), file=sys.stderr)
        return 2
    except SchemaTooNew as exc:
        # Not worth a retry, unlike 3: this release must not run on this database at all.
        # The message may name migrations the database recorded: escaped.
        print(f"cleanair: {escape_nonprintable(exc)}", file=sys.stderr)
        return 2
    except StoreUnavailable as exc:
        return _unavailable(exc)
    except OSError as exc:  # a file the settings name that cannot be made or opened
        where = f"{exc.filename}: " if exc.filename else ""
        print(
            f"cleanair: {escape_nonprintable(where + (exc.strerror or str(exc)))}", file=sys.stderr
        )
        return 2
    try:
        status = _run(deployment.core, args)
    except (OperatorError, ValueError) as exc:
        # Messages embed arguments and stored names ("no user ...", "no such file: ...").
        print(f"cleanair: {escape_nonprintable(exc)}", file=sys.stderr)
        return 1
    except StoreUnavailable as exc:
        return _unavailable(exc)
    finally:
        deployment.close()
    return status


def _unavailable(exc: StoreUnavailable) -> int:
    """The database is busy past its timeout, full or failing: worth a retry, so exit 3."""
    print(f"cleanair: {exc.detail}", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main())
