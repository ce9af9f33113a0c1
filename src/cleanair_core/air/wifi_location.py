"""Locating a Wi-Fi scan against imported access points, and importing those access points.

Privacy rules, which are features:

- A BSSID is personal data. A scan is used to compute one point and dropped: nothing here logs,
  stores or puts a BSSID into an exception message or a repr.
- One access point alone never locates anyone (the rule of the Wi-Fi location ecosystem:
  otherwise one real BSSID plus a made-up one would look up where that one router is). A scan
  needs at least two usable access points, and the position needs a cluster of at least two
  known ones that agree.
- Only fixed access points count: randomised (locally administered), multicast, all-zero and
  broadcast addresses are dropped before anything is looked up.
- Imported access points are stored only under `TokenKeys.hash_bssid(normalise_mac(bssid))`.

The estimate follows Ichnaea (Mozilla Location Service): complete-linkage clustering of the
known access points at 500 m, the best cluster wins, a signal-weighted mean inside it, and an
accuracy from the spread clamped to 10..500 m.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import ClassVar

import attrs

from cleanair_core.air.wifi import AccessPointStore, KnownAccessPoint, WifiAccessPoint
from cleanair_core.errors import OperatorError
from cleanair_core.geo import Point, distance_m
from cleanair_core.keys import TokenKeys
from cleanair_core.offload import Offload, inline

#: Fewer usable (and, for the estimate, known and agreeing) access points locate nobody.
MIN_ACCESS_POINTS = 2
#: Complete-linkage cut: every access point of a cluster lies within this of every other.
CLUSTER_DISTANCE_M = 500.0
MIN_ACCURACY_M = 10.0
MAX_ACCURACY_M = 500.0
#: Only the strongest this many access points of a scan are looked up and clustered; bounds
#: the lookup and the cubic clustering whatever a caller sends.
MAX_SCAN_ACCESS_POINTS = 64
#: Signals are clamped into this range (dBm) before weighting: 0 or positive values would
#: divide by zero or invert the weighting, and anything below -100 dBm is noise.
SIGNAL_RANGE_DBM = (-100, -10)

_HEX12 = re.compile(r"[0-9a-f]{12}")


# -- MAC addresses ------------------------------------------------------------------------------


def normalise_mac(raw: str) -> str | None:
    """The lowercase colon form of a BSSID, or None when `raw` is not one.

    Accepts `01:23:45:67:89:ab`, `01-23-45-67-89-ab`, `0123.4567.89ab` and `0123456789ab` in
    either case, with surrounding whitespace. Separators must sit where those forms put them
    and be used consistently; anything that is not exactly 12 hex digits is refused.
    """
    text = raw.strip().lower()
    if len(text) == 17:
        separator = text[2]
        if separator not in ":-" or any(text[i] != separator for i in range(2, 17, 3)):
            return None
        digits = text.replace(separator, "")
    elif len(text) == 14:
        if text[4] != "." or text[9] != ".":
            return None
        digits = text.replace(".", "")
    else:
        digits = text
    if not _HEX12.fullmatch(digits):
        return None
    return ":".join(digits[i : i + 2] for i in range(0, 12, 2))


def is_fixed_access_point(mac: str) -> bool:
    """Whether `mac` (any form `normalise_mac` accepts) can be a fixed access point.

    False for invalid addresses, all zeros, broadcast, multicast (first octet & 0x01) and
    locally administered ones (first octet & 0x02: randomised by phones and hotspots, so they
    move and must never be used to locate).
    """
    normalised = normalise_mac(mac)
    if normalised is None or normalised in {"00:00:00:00:00:00", "ff:ff:ff:ff:ff:ff"}:
        return False
    first_octet = int(normalised[:2], 16)
    return first_octet & 0x03 == 0


def usable_scan(scan: Sequence[WifiAccessPoint]) -> list[tuple[str, int]]:
    """The fixed access points of a scan as (normalised MAC, rssi), strongest first.

    Invalid and non-fixed addresses are dropped; a MAC seen twice keeps its strongest signal.
    Equal signals are ordered by MAC so that the result does not depend on the scan's order.
    """
    strongest: dict[str, int] = {}
    for entry in scan:
        mac = normalise_mac(entry.mac)
        if mac is None or not is_fixed_access_point(mac):
            continue
        if mac not in strongest or entry.rssi > strongest[mac]:
            strongest[mac] = entry.rssi
    return sorted(strongest.items(), key=lambda item: (-item[1], item[0]))


def locatable_scan(scan: Sequence[WifiAccessPoint]) -> list[tuple[str, int]] | None:
    """What may be looked up of a scan, local or remote: its strongest
    `MAX_SCAN_ACCESS_POINTS` usable access points, or None when fewer than
    `MIN_ACCESS_POINTS` are usable (one BSSID alone must never locate anyone)."""
    usable = usable_scan(scan)[:MAX_SCAN_ACCESS_POINTS]
    return usable if len(usable) >= MIN_ACCESS_POINTS else None


# -- the estimate -------------------------------------------------------------------------------


@attrs.frozen
class Estimate:
    """A position from Wi-Fi, how far off it may be, and how many access points it rests on."""

    point: Point
    accuracy_m: float
    access_points: int


def signal_weight(rssi: int) -> float:
    """Ichnaea's weight of an observation: 1 / rssi², rssi clamped to `SIGNAL_RANGE_DBM`.

    -30 dBm weighs 9 times -90 dBm. BeaconDB's ((1/(s-20)²)·10⁴)² weighs the same pair about
    23 times: it trusts the strongest access point more. Phones report RSSI with offsets of
    several dB between models, and the cluster is at most 500 m wide anyway, so the gentler
    Ichnaea weighting is the safer default here.
    """
    low, high = SIGNAL_RANGE_DBM
    signal = min(max(rssi, low), high)
    return 1.0 / (signal * signal)


def _wrap_lon(lon: float) -> float:
    """A longitude, or longitude difference, in -180..180."""
    wrapped = (lon + 180.0) % 360.0 - 180.0
    return 180.0 if wrapped == -180.0 and lon > 0 else wrapped


def _complete_linkage(points: Sequence[Point], max_distance_m: float) -> list[list[int]]:
    """Indices of `points` grouped by agglomerative clustering with complete linkage.

    Clusters merge closest first while the farthest pair of the merged cluster stays within
    `max_distance_m` (scipy's `linkage(method="complete")` cut by `fcluster` at that distance).
    Cubic in the number of points; callers bound it with `MAX_SCAN_ACCESS_POINTS`.
    """
    count = len(points)
    link = [[distance_m(points[i], points[j]) for j in range(count)] for i in range(count)]
    members: list[list[int]] = [[i] for i in range(count)]
    active = list(range(count))
    while len(active) > 1:
        best: tuple[float, int, int] | None = None
        for position, a in enumerate(active):
            for b in active[position + 1 :]:
                if link[a][b] <= max_distance_m and (best is None or link[a][b] < best[0]):
                    best = (link[a][b], a, b)
        if best is None:
            break
        _, a, b = best
        members[a].extend(members[b])
        active.remove(b)
        for c in active:
            if c != a:  # Lance-Williams update for complete linkage
                link[a][c] = link[c][a] = max(link[a][c], link[b][c])
    return [members[a] for a in active]


def estimate(observations: Sequence[tuple[KnownAccessPoint, int]]) -> Estimate | None:
    """Where a scan was taken, from the known access points it saw and their signals (dBm).

    None unless at least `MIN_ACCESS_POINTS` known access points agree. The strongest
    `MAX_SCAN_ACCESS_POINTS` are clustered with complete linkage at `CLUSTER_DISTANCE_M`, so an
    access point that moved far away (a router taken to a new home) forms its own cluster and
    is outvoted. The best cluster has the most access points, then the strongest total signal;
    if it has fewer than `MIN_ACCESS_POINTS`, there is no answer.

    The position is the `signal_weight`-weighted mean of the cluster: latitudes directly,
    longitudes as offsets from the strongest access point wrapped to -180..180, so a cluster
    across the antimeridian averages near ±180 and not near 0. The mean is clamped to the
    cluster's bounding box to absorb rounding. The accuracy is the distance from the position
    to the farthest access point of the cluster, clamped to `MIN_ACCURACY_M..MAX_ACCURACY_M`.
    """
    if len(observations) < MIN_ACCESS_POINTS:
        return None
    ranked = sorted(observations, key=lambda item: -item[1])[:MAX_SCAN_ACCESS_POINTS]
    points = [known.point for known, _ in ranked]
    clusters = _complete_linkage(points, CLUSTER_DISTANCE_M)

    def strength(cluster: list[int]) -> tuple[int, int]:
        low, high = SIGNAL_RANGE_DBM
        return len(cluster), sum(min(max(ranked[i][1], low), high) for i in cluster)

    best = max(clusters, key=strength)
    if len(best) < MIN_ACCESS_POINTS:
        return None
    best.sort()  # strongest first: the first is the reference for longitude offsets
    reference = points[best[0]].lon
    lats = [points[i].lat for i in best]
    offsets = [_wrap_lon(points[i].lon - reference) for i in best]
    weights = [signal_weight(ranked[i][1]) for i in best]
    total = math.fsum(weights)
    lat = math.fsum(w * v for w, v in zip(weights, lats, strict=True)) / total
    offset = math.fsum(w * v for w, v in zip(weights, offsets, strict=True)) / total
    lat = min(max(lat, min(lats)), max(lats))
    offset = min(max(offset, min(offsets)), max(offsets))
    point = Point(lat, _wrap_lon(reference + offset))
    spread = max(distance_m(point, points[i]) for i in best)
    accuracy = min(max(spread, MIN_ACCURACY_M), MAX_ACCURACY_M)
    return Estimate(point, accuracy, len(best))


def estimate_position(observations: Sequence[tuple[KnownAccessPoint, int]]) -> Point | None:
    """The point of `estimate`, or None."""
    found = estimate(observations)
    return None if found is None else found.point


class LocalWifiGeolocator:
    """`WifiGeolocator` over the access points the operator imported (`AccessPointStore`).

    The scan is normalised, filtered and hashed with the server key; only the hashes reach the
    store. Nothing is logged, and nothing of the scan is kept after `locate` returns.
    """

    def __init__(self, store: AccessPointStore, keys: TokenKeys, offload: Offload = inline) -> None:
        self._store = store
        self._keys = keys
        self._offload = offload

    def __repr__(self) -> str:
        return "LocalWifiGeolocator()"

    def estimate(self, scan: Sequence[WifiAccessPoint]) -> Estimate | None:
        """The estimate for `scan`, or None when it cannot be located.

        A synchronous primary-key lookup of at most `MAX_SCAN_ACCESS_POINTS` hashes.
        """
        usable = locatable_scan(scan)
        if usable is None:
            return None
        hashed = [(self._keys.hash_bssid(mac), rssi) for mac, rssi in usable]
        known = self._store.find_access_points([bssid_hash for bssid_hash, _ in hashed])
        observations = [
            (found, rssi)
            for bssid_hash, rssi in hashed
            if (found := known.get(bssid_hash)) is not None
        ]
        return estimate(observations)

    async def locate(self, scan: Sequence[WifiAccessPoint]) -> Point | None:
        """The point of `estimate` (its store lookup run on the offload), or None."""
        found = await self._offload(lambda: self.estimate(scan))
        return None if found is None else found.point


# -- importing access points ------------------------------------------------------------------


class AccessPointFileError(OperatorError):
    """The import file cannot be read as access points at all (no usable header)."""


@attrs.frozen
class RowError:
    """Why one row of an import file was skipped; the row's content is never repeated."""

    line: int
    reason: str


@attrs.define
class ImportReport:
    """What an import did so far: the parser counts rows, the importer counts writes.

    `rows` counts data rows read (not the header, not blank lines); `skipped` those refused;
    `imported` the access points written to the store. `first_errors` keeps the first
    `MAX_ERRORS` refusals by line number and reason, never with the BSSID.
    """

    MAX_ERRORS: ClassVar[int] = 10

    rows: int = 0
    skipped: int = 0
    imported: int = 0
    first_errors: list[RowError] = attrs.field(factory=list)

    def skip(self, line: int, reason: str) -> None:
        self.skipped += 1
        if len(self.first_errors) < self.MAX_ERRORS:
            self.first_errors.append(RowError(line, reason))


_REQUIRED_COLUMNS = ("bssid", "lat", "lon")
_OPTIONAL_COLUMNS = ("accuracy_m",)
_HEADER_HELP = (
    "the first line must be a header naming the columns bssid, lat and lon "
    "(accuracy_m optional, any order)"
)


def _columns(header: list[str]) -> dict[str, int]:
    names = [name.strip().lstrip("\ufeff").strip().lower() for name in header]
    index: dict[str, int] = {}
    for position, name in enumerate(names):
        if name in _REQUIRED_COLUMNS or name in _OPTIONAL_COLUMNS:
            if name in index:
                raise AccessPointFileError(f"the header names the column {name} twice")
            index[name] = position
    if any(name not in index for name in _REQUIRED_COLUMNS):
        # Never echo the line: a file without a header starts with a BSSID.
        raise AccessPointFileError(_HEADER_HELP)
    return index


def _finite(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _access_point(row: list[str], columns: dict[str, int]) -> tuple[str, KnownAccessPoint] | str:
    """The normalised MAC and the access point of one row, or the reason to skip it."""
    mac = normalise_mac(row[columns["bssid"]])
    if mac is None:
        return "invalid BSSID"
    if not is_fixed_access_point(mac):
        return "not a fixed access point (zero, broadcast, multicast or locally administered)"
    lat, lon = _finite(row[columns["lat"]]), _finite(row[columns["lon"]])
    if lat is None or lon is None or not (-90.0 <= lat <= 90.0 and -180.0 <= lon <= 180.0):
        return "invalid coordinates"
    accuracy: float | None = None
    if "accuracy_m" in columns and row[columns["accuracy_m"]].strip():
        accuracy = _finite(row[columns["accuracy_m"]])
        if accuracy is None or accuracy < 0:
            return "invalid accuracy_m"
    return mac, KnownAccessPoint(Point(lat, lon), accuracy)


def parse_access_point_csv(
    lines: Iterable[str], report: ImportReport | None = None
) -> Iterator[tuple[str, KnownAccessPoint]]:
    """Stream (normalised MAC, access point) pairs from CSV text; the caller hashes the MAC.

    The first line is a header naming `bssid`, `lat`, `lon` and optionally `accuracy_m`, in
    any order and case; other columns are ignored. A row with the wrong number of fields, an
    invalid or non-fixed BSSID, coordinates outside WGS-84, or a negative or non-numeric
    accuracy is skipped and recorded in `report`; blank lines are ignored. Raises
    `AccessPointFileError` (when iteration starts) if the header is missing or incomplete.
    Reads one row at a time, so a file of any size streams. Give `lines` from a file opened
    with `newline=""` so quoted fields behave.
    """
    report = ImportReport() if report is None else report
    reader = csv.reader(lines)
    header = next(reader, None)
    if header is None:
        raise AccessPointFileError(f"the file is empty; {_HEADER_HELP}")
    columns = _columns(header)
    width = len(header)
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error:
            report.rows += 1
            report.skip(reader.line_num, "malformed CSV")
            continue
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        report.rows += 1
        if len(row) != width:
            report.skip(reader.line_num, "wrong number of fields")
            continue
        parsed = _access_point(row, columns)
        if isinstance(parsed, str):
            report.skip(reader.line_num, parsed)
            continue
        yield parsed


#: Access points written per `put_access_points` call (one write transaction each).
IMPORT_BATCH_SIZE = 10_000
#: `import_access_points` reports progress after about this many rows.
PROGRESS_EVERY_ROWS = 100_000


def import_access_points(
    store: AccessPointStore,
    keys: TokenKeys,
    lines: Iterable[str],
    *,
    report: ImportReport | None = None,
    batch_size: int = IMPORT_BATCH_SIZE,
    on_progress: Callable[[ImportReport], None] | None = None,
    progress_every: int = PROGRESS_EVERY_ROWS,
) -> ImportReport:
    """Import access points from CSV text (see `parse_access_point_csv`) into `store`.

    Each BSSID is hashed with `keys` (the server key the service uses, or lookups will not
    find it) before it leaves this function; the store never sees a raw BSSID. Rows stream
    through in batches of `batch_size`, one store write each, so memory stays flat and the
    batches already written stay written if a later one fails. A later row for the same BSSID
    replaces an earlier one. Pass a `report` to read the counts even when an exception (an
    unreadable file, say) stops the import half way.
    """
    if batch_size < 1 or progress_every < 1:
        raise ValueError("batch_size and progress_every must be at least 1")
    report = ImportReport() if report is None else report
    batch: list[tuple[str, KnownAccessPoint]] = []
    next_progress = progress_every

    def flush() -> None:
        report.imported += store.put_access_points(batch)
        batch.clear()

    for mac, known in parse_access_point_csv(lines, report):
        batch.append((keys.hash_bssid(mac), known))
        if len(batch) >= batch_size:
            flush()
        if on_progress is not None and report.rows >= next_progress:
            on_progress(report)
            next_progress = (report.rows // progress_every + 1) * progress_every
    if batch:
        flush()
    return report
