"""`cleanair stations`: import, list, evaluate and prune the observing stations' hours."""

from __future__ import annotations

import json
import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

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
)
from cleanair_core.service import CleanAir
from cleanair_runtime.cli.formatting import when
from cleanair_runtime.terminal import escape_nonprintable, natural_key

if TYPE_CHECKING:  # imported where used: other commands start without the archive reader
    from cleanair_sources.openaq_archive import ArchiveTally


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


def import_stations(
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
                f"latest ends at {when(max(hours) + shift)} (the last full hour is "
                f"{when(last_full_hour(now))})",
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
            f"({when(now)}): not stored",
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


def list_stations(core: CleanAir, as_json: bool) -> None:
    """The stations and their stored hours, as a table or JSON."""
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
            f"{station.area_type or '-'}\t{s.observations}\t{when(s.first_hour_end)}\t"
            f"{when(s.last_hour_end)}"
        )


def evaluate_stations(
    core: CleanAir,
    pollutant: Pollutant | None,
    since: datetime | None,
    until: datetime | None,
    as_json: bool,
) -> int:
    """The fused air scored against each station left out, as a table or JSON; exit status 1
    when there is nothing to evaluate."""
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
        (True, True): f" whose hour ends from {when(since)} to {when(until)}",
        (True, False): f" whose hour ends at {when(since)} or later",
        (False, True): f" whose hour ends at {when(until)} or earlier",
        (False, False): "",
    }[since is not None, until is not None]
    which = f"{pollutant.value} " if pollutant else ""
    return (
        f"no stored {which}observations{window} to evaluate; the stored observations (every "
        f"pollutant) end from {when(first)} to {when(last)}"
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


def prune_stations(core: CleanAir) -> None:
    """Delete the observations older than the retention allows."""
    seconds = core.policy.observation_retention_seconds
    if not seconds:
        print("deleted 0 observations (CLEANAIR_OBSERVATION_RETENTION_DAYS is 0: kept for ever)")
        return
    deleted = core.prune_observations()
    print(f"deleted {deleted} observations older than {seconds // 86_400} days")
