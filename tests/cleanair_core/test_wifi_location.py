"""Wi-Fi geolocation in the core: MAC rules, the estimate, the local geolocator, the importer."""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cleanair_core.air.wifi import KnownAccessPoint, WifiAccessPoint
from cleanair_core.air.wifi_location import (
    CLUSTER_DISTANCE_M,
    MAX_ACCURACY_M,
    MIN_ACCURACY_M,
    AccessPointFileError,
    ImportReport,
    LocalWifiGeolocator,
    RowError,
    estimate,
    estimate_position,
    import_access_points,
    is_fixed_access_point,
    normalise_mac,
    parse_access_point_csv,
    signal_weight,
    usable_scan,
)
from cleanair_core.geo import Point, distance_m
from cleanair_core.keys import TokenKeys
from cleanair_storage.memory import MemoryStore

KEYS = TokenKeys(b"wifi-location-tests-server-key-32b")
METRES_PER_DEGREE = 6_371_008.8 * math.pi / 180
CANONICAL = re.compile(r"[0-9a-f]{2}(:[0-9a-f]{2}){5}")

# -- strategies -------------------------------------------------------------------------------

fixed_first_octet = st.integers(0, 63).map(lambda value: value << 2)
any_octet = st.integers(0, 255)
fixed_octets = st.tuples(fixed_first_octet, *[any_octet] * 5).filter(any)
unfixed_octets = st.one_of(
    st.just((0,) * 6),
    st.just((255,) * 6),
    st.tuples(any_octet.map(lambda v: v | 0x01), *[any_octet] * 5),  # multicast
    st.tuples(any_octet.map(lambda v: v | 0x02), *[any_octet] * 5),  # locally administered
)
rssi = st.integers(-100, -10)


def render(octets: Sequence[int], form: str, upper: bool) -> str:
    digits = "".join(f"{o:02x}" for o in octets)
    digits = digits.upper() if upper else digits
    pairs = [digits[i : i + 2] for i in range(0, 12, 2)]
    match form:
        case "colon":
            return ":".join(pairs)
        case "dash":
            return "-".join(pairs)
        case "dot":
            return ".".join(digits[i : i + 4] for i in range(0, 12, 4))
        case _:
            return digits


def canonical(octets: Sequence[int]) -> str:
    return render(octets, "colon", upper=False)


forms = st.sampled_from(["colon", "dash", "dot", "bare"])


@st.composite
def mac_text(draw: st.DrawFn, octets: st.SearchStrategy[tuple[int, ...]] = fixed_octets) -> str:
    return render(draw(octets), draw(forms), draw(st.booleans()))


def offset(base: Point, north_m: float, east_m: float) -> Point:
    """A point `north_m` and `east_m` metres from `base` (flat-earth; fine below a few km)."""
    lat = base.lat + north_m / METRES_PER_DEGREE
    lon = base.lon + east_m / (METRES_PER_DEGREE * math.cos(math.radians(base.lat)))
    return Point(lat, (lon + 180.0) % 360.0 - 180.0)


def known(point: Point) -> KnownAccessPoint:
    return KnownAccessPoint(point)


bases = st.builds(
    Point,
    st.floats(-75, 75, allow_nan=False),
    st.floats(-180, 180, allow_nan=False, exclude_max=True),
)
near_offsets = st.tuples(st.floats(-150, 150), st.floats(-150, 150))  # any two < 500 m apart


def lon_offset(lon: float, reference: float) -> float:
    return (lon - reference + 180.0) % 360.0 - 180.0


# -- normalise_mac and is_fixed_access_point --------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        "01:23:45:67:89:ab",
        "01-23-45-67-89-ab",
        "0123.4567.89ab",
        "0123456789AB",
        "01:23:45:67:89:AB",
        "  01-23-45-67-89-Ab\n",
    ],
)
def test_normalise_accepts_the_usual_forms(raw: str) -> None:
    assert normalise_mac(raw) == "01:23:45:67:89:ab"


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "0123456789a",
        "0123456789abc",
        "0123456789ag",
        "01:23:45:67:89",
        "01:23-45:67:89:ab",  # mixed separators
        "01:23:45:67:89:ab:cd",
        "0:123:45:67:89:ab",
        "01.2345.6789ab",
        "0123:4567:89ab",
        "01 23 45 67 89 ab",
        "\uff10\uff11\uff12\uff13\uff14\uff15\uff16\uff17\uff18\uff19ab",  # fullwidth digits
    ],
)
def test_normalise_refuses_anything_else(raw: str) -> None:
    assert normalise_mac(raw) is None


@given(st.one_of(st.text(max_size=20), mac_text(st.tuples(*[any_octet] * 6))))
def test_normalise_is_idempotent_and_canonical(raw: str) -> None:
    once = normalise_mac(raw)
    if once is not None:
        assert CANONICAL.fullmatch(once)
        assert normalise_mac(once) == once


@given(st.tuples(*[any_octet] * 6), forms, st.booleans())
def test_every_form_of_one_address_normalises_alike(
    octets: tuple[int, ...], form: str, upper: bool
) -> None:
    assert normalise_mac(render(octets, form, upper)) == canonical(octets)


@pytest.mark.parametrize(
    ("mac", "fixed"),
    [
        ("00:11:22:33:44:55", True),
        ("fc:ff:ff:ff:ff:ff", True),
        ("00:00:00:00:00:01", True),
        ("00:00:00:00:00:00", False),  # all zero
        ("ff:ff:ff:ff:ff:ff", False),  # broadcast
        ("01:00:5e:00:00:01", False),  # multicast
        ("02:11:22:33:44:55", False),  # locally administered
        ("da:a1:19:00:00:01", False),  # a randomised phone address
        ("not a mac", False),
    ],
)
def test_fixed_access_points(mac: str, fixed: bool) -> None:
    assert is_fixed_access_point(mac) is fixed


@given(unfixed_octets, forms, st.booleans())
def test_unfixed_addresses_are_never_fixed(octets: tuple[int, ...], form: str, up: bool) -> None:
    assert not is_fixed_access_point(render(octets, form, up))


# -- usable_scan ------------------------------------------------------------------------------


@given(st.lists(st.tuples(st.one_of(fixed_octets, unfixed_octets), forms, rssi), max_size=12))
def test_usable_scan_drops_unfixed_and_keeps_the_strongest_duplicate(
    entries: list[tuple[tuple[int, ...], str, int]],
) -> None:
    scan = [WifiAccessPoint(render(o, form, False), signal) for o, form, signal in entries]
    expected: dict[str, int] = {}
    for octets, _, signal in entries:
        if is_fixed_access_point(canonical(octets)):
            expected[canonical(octets)] = max(signal, expected.get(canonical(octets), -1000))

    usable = usable_scan(scan)

    assert dict(usable) == expected
    assert len(usable) == len(expected)  # de-duplicated
    assert [signal for _, signal in usable] == sorted(expected.values(), reverse=True)
    assert all(is_fixed_access_point(mac) and CANONICAL.fullmatch(mac) for mac, _ in usable)


def test_usable_scan_example() -> None:
    scan = [
        WifiAccessPoint("00:11:22:33:44:55", -80),
        WifiAccessPoint("00-11-22-33-44-55", -60),  # same one, stronger
        WifiAccessPoint("0011.2233.4466", -70),
        WifiAccessPoint("02:11:22:33:44:55", -20),  # randomised
        WifiAccessPoint("garbage", -10),
    ]
    assert usable_scan(scan) == [("00:11:22:33:44:55", -60), ("00:11:22:33:44:66", -70)]


# -- estimate ---------------------------------------------------------------------------------

BERLIN = Point(52.52, 13.405)


def test_one_known_access_point_never_locates() -> None:
    assert estimate([(known(BERLIN), -40)]) is None
    assert estimate([]) is None


def test_two_that_disagree_do_not_locate() -> None:
    far = offset(BERLIN, 600, 0)
    assert estimate([(known(BERLIN), -40), (known(far), -50)]) is None


def test_two_that_agree_locate_between_them() -> None:
    east = offset(BERLIN, 0, 200)
    found = estimate([(known(BERLIN), -60), (known(east), -60)])
    assert found is not None
    assert found.access_points == 2
    assert found.point.lat == pytest.approx(BERLIN.lat)
    assert distance_m(found.point, BERLIN) == pytest.approx(100, abs=0.5)
    assert found.accuracy_m == pytest.approx(100, abs=0.5)
    assert estimate_position([(known(BERLIN), -60), (known(east), -60)]) == found.point


def test_weights_follow_ichnaea() -> None:
    assert signal_weight(-30) / signal_weight(-90) == pytest.approx(9)
    assert signal_weight(0) == signal_weight(-10)  # clamped: no division by zero
    assert signal_weight(-150) == signal_weight(-100)


def test_the_antimeridian_is_not_the_prime_meridian() -> None:
    west, east = Point(10.0, 179.9995), Point(10.0, -179.9995)
    found = estimate([(known(west), -50), (known(east), -50)])
    assert found is not None
    assert abs(found.point.lon) > 179.999
    assert found.accuracy_m < 100


@settings(deadline=None)
@given(
    bases,
    st.lists(st.tuples(near_offsets, rssi), min_size=2, max_size=8),
    st.lists(st.tuples(st.floats(0, 2 * math.pi), rssi), max_size=1),
)
def test_the_estimate_lies_in_the_chosen_clusters_box(
    base: Point,
    near: list[tuple[tuple[float, float], int]],
    outliers: list[tuple[float, int]],
) -> None:
    cluster = [(known(offset(base, n, e)), signal) for (n, e), signal in near]
    far = [
        (known(offset(base, 50_000 * math.cos(b), 50_000 * math.sin(b))), signal)
        for b, signal in outliers
    ]
    found = estimate(cluster + far)
    assert found is not None
    assert found.access_points == len(cluster)
    lats = [ap.point.lat for ap, _ in cluster]
    lons = [lon_offset(ap.point.lon, base.lon) for ap, _ in cluster]
    assert min(lats) - 1e-9 <= found.point.lat <= max(lats) + 1e-9
    assert min(lons) - 1e-9 <= lon_offset(found.point.lon, base.lon) <= max(lons) + 1e-9
    assert MIN_ACCURACY_M <= found.accuracy_m <= MAX_ACCURACY_M


@settings(deadline=None)
@given(
    bases,
    st.lists(st.tuples(near_offsets, rssi), min_size=2, max_size=6),
    st.floats(0, 2 * math.pi),
    rssi,
    st.integers(0, 6),
)
def test_a_moved_router_far_away_is_outvoted(
    base: Point,
    near: list[tuple[tuple[float, float], int]],
    bearing: float,
    outlier_rssi: int,
    position: int,
) -> None:
    cluster = [(known(offset(base, n, e)), signal) for (n, e), signal in near]
    moved = known(offset(base, 50_000 * math.cos(bearing), 50_000 * math.sin(bearing)))
    with_outlier = [*cluster]
    with_outlier.insert(min(position, len(cluster)), (moved, outlier_rssi))

    assert estimate(with_outlier) == estimate(cluster)


def test_a_moved_router_with_the_strongest_signal_does_not_drag() -> None:
    cluster = [
        (known(BERLIN), -70),
        (known(offset(BERLIN, 100, 50)), -75),
        (known(offset(BERLIN, -80, 120)), -72),
    ]
    moved = (known(offset(BERLIN, 50_000, 0)), -20)
    found = estimate([moved, *cluster])
    assert found is not None
    assert found.access_points == 3
    assert distance_m(found.point, BERLIN) < 150


def test_the_larger_cluster_wins_then_the_stronger() -> None:
    here = [(known(BERLIN), -80), (known(offset(BERLIN, 50, 0)), -80)]
    there_point = offset(BERLIN, 5_000, 0)
    there = [(known(there_point), -40), (known(offset(there_point, 50, 0)), -40)]
    three_here = [*here, (known(offset(BERLIN, 0, 50)), -90)]

    larger = estimate(three_here + there)
    assert larger is not None
    assert distance_m(larger.point, BERLIN) < 100
    stronger = estimate(here + there)
    assert stronger is not None
    assert distance_m(stronger.point, there_point) < 100


@given(bases, near_offsets, rssi, rssi)
def test_a_stronger_signal_pulls_the_estimate_closer(
    base: Point, other: tuple[float, float], a_rssi: int, b_rssi: int
) -> None:
    a, b = base, offset(base, *other)
    assume(distance_m(a, b) > 1)
    found = estimate_position([(known(a), a_rssi), (known(b), b_rssi)])
    assert found is not None
    if a_rssi > b_rssi:
        assert distance_m(found, a) < distance_m(found, b)
    elif a_rssi == b_rssi:
        assert distance_m(found, a) == pytest.approx(distance_m(found, b), rel=1e-3, abs=1e-3)
    stronger = estimate_position([(known(a), min(a_rssi + 5, -10)), (known(b), b_rssi)])
    assert stronger is not None
    assert distance_m(stronger, a) <= distance_m(found, a) + 1e-6


def test_cluster_distance_is_ichnaeas() -> None:
    assert CLUSTER_DISTANCE_M == 500


def test_linkage_is_complete_not_single() -> None:
    # A chain of access points 400 m apart: neighbours agree, the ends do not. Complete linkage
    # never lets a cluster grow wider than 500 m; single linkage would chain all three.
    chain = [(known(offset(BERLIN, 0, east)), -60) for east in (0, 400, 800)]
    found = estimate(chain)
    assert found is not None
    assert found.access_points == 2
    assert found.accuracy_m <= 250


# -- LocalWifiGeolocator ----------------------------------------------------------------------

A, B, C = "00:11:22:33:44:01", "00:11:22:33:44:02", "00:11:22:33:44:03"


def geolocator_over(access_points: Mapping[str, Point]) -> tuple[LocalWifiGeolocator, MemoryStore]:
    store = MemoryStore()
    store.put_access_points(
        (KEYS.hash_bssid(normalise_mac(mac) or mac), KnownAccessPoint(point))
        for mac, point in access_points.items()
    )
    return LocalWifiGeolocator(store, KEYS), store


def locate(geolocator: LocalWifiGeolocator, scan: Sequence[WifiAccessPoint]) -> Point | None:
    return asyncio.run(geolocator.locate(scan))


def test_locates_a_scan_between_known_access_points() -> None:
    east = offset(BERLIN, 0, 200)
    geolocator, _ = geolocator_over({A: BERLIN, B: east})
    scan = [
        WifiAccessPoint("00-11-22-33-44-01", -60),
        WifiAccessPoint("0011.2233.4402", -60),
        WifiAccessPoint("00:11:22:33:44:99", -30),  # unknown: ignored
    ]
    point = locate(geolocator, scan)
    assert point is not None
    assert distance_m(point, BERLIN) == pytest.approx(100, abs=0.5)
    assert geolocator.estimate(scan) is not None


def test_a_different_server_key_finds_nothing() -> None:
    geolocator, store = geolocator_over({A: BERLIN, B: offset(BERLIN, 0, 200)})
    other = LocalWifiGeolocator(store, TokenKeys(b"another-server-key-of-32-bytes!!"))
    scan = [WifiAccessPoint(A, -60), WifiAccessPoint(B, -60)]
    assert locate(geolocator, scan) is not None
    assert locate(other, scan) is None


class CountingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.lookups: list[list[str]] = []

    def find_access_points(self, bssid_hashes: Sequence[str]) -> Mapping[str, KnownAccessPoint]:
        self.lookups.append(list(bssid_hashes))
        return super().find_access_points(bssid_hashes)


@given(
    fixed_octets,
    st.lists(fixed_octets, max_size=5),
    st.lists(unfixed_octets, max_size=5),
    st.lists(rssi, min_size=11, max_size=11),
)
def test_a_single_known_access_point_never_locates(
    known_octets: tuple[int, ...],
    unknown: list[tuple[int, ...]],
    unfixed: list[tuple[int, ...]],
    signals: list[int],
) -> None:
    near = offset(BERLIN, 20, 20)
    # The store knows the one fixed access point and, as if imported by mistake, every
    # unfixed address of the scan, all next to each other.
    store = CountingStore()
    store.put_access_points(
        [(KEYS.hash_bssid(canonical(known_octets)), known(BERLIN))]
        + [(KEYS.hash_bssid(canonical(o)), known(near)) for o in unfixed]
    )
    assume(canonical(known_octets) not in {canonical(o) for o in unknown})
    macs = [known_octets, *unknown, *unfixed]
    scan = [WifiAccessPoint(canonical(o), s) for o, s in zip(macs, signals, strict=False)]

    assert asyncio.run(LocalWifiGeolocator(store, KEYS).locate(scan)) is None
    # Unfixed addresses never even reach the store.
    unfixed_hashes = {KEYS.hash_bssid(canonical(o)) for o in unfixed}
    assert not any(unfixed_hashes & set(lookup) for lookup in store.lookups)


def test_unfixed_addresses_are_not_used_even_when_known() -> None:
    randomised = ["02:11:22:33:44:01", "06:11:22:33:44:02", "01:00:5e:00:00:01"]
    geolocator, _ = geolocator_over(
        {mac: offset(BERLIN, 10 * i, 0) for i, mac in enumerate(randomised)}
    )
    assert locate(geolocator, [WifiAccessPoint(mac, -50) for mac in randomised]) is None


def test_a_scan_of_one_usable_access_point_is_not_looked_up() -> None:
    store = CountingStore()
    geolocator = LocalWifiGeolocator(store, KEYS)
    assert locate(geolocator, [WifiAccessPoint(A, -50), WifiAccessPoint(A, -40)]) is None
    assert store.lookups == []


# -- nothing shows a BSSID --------------------------------------------------------------------


def spellings(mac: str) -> list[str]:
    octets = [int(part, 16) for part in mac.split(":")]
    return [
        render(octets, form, up)
        for form in ("colon", "dash", "dot", "bare")
        for up in (False, True)
    ]


@given(mac_text(st.tuples(*[any_octet] * 6)), st.integers(-150, 0))
def test_a_scan_entry_never_shows_its_bssid(mac: str, signal: int) -> None:
    entry = WifiAccessPoint(mac, signal)
    shown = repr(entry) + str(entry) + repr([entry]) + f"{entry}"
    for spelling in [mac, *spellings(normalise_mac(mac) or mac)]:
        assert spelling not in shown


def test_errors_and_reports_never_show_a_bssid() -> None:
    mac = "00:11:22:33:44:55"
    # A file without a header starts with a BSSID; the error must not repeat it.
    with pytest.raises(AccessPointFileError) as raised:
        list(parse_access_point_csv([f"{mac},52.5,13.4\n"]))
    report = ImportReport()
    rows = [
        "bssid,lat,lon\n",
        f"{mac},95,13.4\n",
        f"{mac[:-1]}g,52,13\n",
        "02:11:22:33:44:55,52,13\n",
        f"{mac},52\n",
    ]
    assert list(parse_access_point_csv(rows, report)) == []
    shown = str(raised.value) + repr(raised.value) + repr(report) + str(report.first_errors)
    for spelling in [*spellings(mac), "02:11:22:33:44:55", f"{mac[:-1]}g"]:
        assert spelling not in shown
    assert repr(LocalWifiGeolocator(MemoryStore(), KEYS)) == "LocalWifiGeolocator()"


def test_a_failing_scan_raises_without_the_bssid() -> None:
    class BrokenStore(MemoryStore):
        def find_access_points(self, bssid_hashes: Sequence[str]) -> Mapping[str, KnownAccessPoint]:
            raise RuntimeError("database is locked")

    scan = [WifiAccessPoint(A, -50), WifiAccessPoint(B, -50)]
    with pytest.raises(RuntimeError) as raised:
        locate(LocalWifiGeolocator(BrokenStore(), KEYS), scan)
    text = "".join(str(arg) for arg in (raised.value, repr(raised.value), raised.value.__context__))
    for spelling in [*spellings(A), *spellings(B)]:
        assert spelling not in text


# -- parsing the import file ------------------------------------------------------------------


def test_parses_columns_in_any_order_and_case() -> None:
    lines = [
        "\ufeffLon, ACCURACY_M ,ssid,Lat,BSSID\n",
        "13.4,25,cafe,52.5,00-11-22-33-44-55\n",
        '13.5,,"with, comma",52.6,0011.2233.4456\n',
        "\n",
    ]
    report = ImportReport()
    assert list(parse_access_point_csv(lines, report)) == [
        ("00:11:22:33:44:55", KnownAccessPoint(Point(52.5, 13.4), 25.0)),
        ("00:11:22:33:44:56", KnownAccessPoint(Point(52.6, 13.5), None)),
    ]
    assert report == ImportReport(rows=2, skipped=0, imported=0, first_errors=[])


def test_bad_rows_are_skipped_and_counted_by_line() -> None:
    lines = [
        "bssid,lat,lon,accuracy_m\n",
        "00:11:22:33:44:01,52.5,13.4,10\n",  # 2 ok
        "00:11:22:33:44,52.5,13.4,10\n",  # 3 invalid BSSID
        "02:11:22:33:44:01,52.5,13.4,10\n",  # 4 randomised
        "00:11:22:33:44:02,91,13.4,10\n",  # 5 latitude out of range
        "00:11:22:33:44:02,52,nan,10\n",  # 6 not finite
        "00:11:22:33:44:02,52,east,10\n",  # 7 not a number
        "00:11:22:33:44:02,52,13,-1\n",  # 8 negative accuracy
        "00:11:22:33:44:02,52,13\n",  # 9 too few fields
        "00:11:22:33:44:02,52,13,1,2\n",  # 10 too many fields
        "\n",  # 11 blank: ignored
        "00:11:22:33:44:03,-33.9,151.2,\n",  # 12 ok, accuracy empty
    ]
    report = ImportReport()
    parsed = list(parse_access_point_csv(lines, report))
    assert [mac for mac, _ in parsed] == ["00:11:22:33:44:01", "00:11:22:33:44:03"]
    assert (report.rows, report.skipped) == (10, 8)
    assert [(e.line, e.reason) for e in report.first_errors] == [
        (3, "invalid BSSID"),
        (4, "not a fixed access point (zero, broadcast, multicast or locally administered)"),
        (5, "invalid coordinates"),
        (6, "invalid coordinates"),
        (7, "invalid coordinates"),
        (8, "invalid accuracy_m"),
        (9, "wrong number of fields"),
        (10, "wrong number of fields"),
    ]


def test_only_the_first_errors_are_kept() -> None:
    lines = ["bssid,lat,lon\n"] + ["bad,1,2\n"] * 25
    report = ImportReport()
    assert list(parse_access_point_csv(lines, report)) == []
    assert report.skipped == 25
    assert report.first_errors == [RowError(n, "invalid BSSID") for n in range(2, 12)]


def test_an_oversized_field_skips_one_row() -> None:
    lines = [
        "bssid,lat,lon\n",
        "x" * 200_000 + ",1,2\n",
        "00:11:22:33:44:01,52.5,13.4\n",
    ]
    report = ImportReport()
    assert len(list(parse_access_point_csv(lines, report))) == 1
    assert report.first_errors == [RowError(2, "malformed CSV")]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([], "empty"),
        (["lat,lon\n", "1,2\n"], "header"),
        (["bssid,lat,lat,lon\n"], "twice"),
        (["00:11:22:33:44:55,1,2\n"], "header"),
    ],
)
def test_a_file_without_a_usable_header_is_refused(lines: list[str], message: str) -> None:
    with pytest.raises(AccessPointFileError, match=message):
        list(parse_access_point_csv(lines))


# -- importing --------------------------------------------------------------------------------


class RecordingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    def put_access_points(self, entries: Iterable[tuple[str, KnownAccessPoint]]) -> int:
        written = super().put_access_points(entries)
        self.batches.append(written)
        return written


def test_import_streams_in_batches_and_hashes_with_the_server_key() -> None:
    consumed = 0

    def lines() -> Iterator[str]:
        nonlocal consumed
        yield "bssid,lat,lon\n"
        for i in range(25):
            consumed += 1
            yield f"00:11:22:33:{i // 256:02x}:{i % 256:02x},52.5,13.4\n"
        consumed += 1
        yield "bad,1,2\n"

    store = RecordingStore()
    consumed_at_first_write: list[int] = []
    original = store.put_access_points

    def put(entries: Iterable[tuple[str, KnownAccessPoint]]) -> int:
        consumed_at_first_write.append(consumed)
        return original(entries)

    store.put_access_points = put  # type: ignore[method-assign]
    progress: list[tuple[int, int]] = []
    report = import_access_points(
        store,
        KEYS,
        lines(),
        batch_size=10,
        on_progress=lambda r: progress.append((r.rows, r.imported)),
        progress_every=7,
    )

    assert store.batches == [10, 10, 5]
    assert consumed_at_first_write[0] == 10  # the file was not read ahead of the first batch
    assert (report.rows, report.imported, report.skipped) == (26, 25, 1)
    assert progress == [(7, 0), (14, 10), (21, 20)]
    assert store.count_access_points() == 25
    wanted = KEYS.hash_bssid("00:11:22:33:00:07")
    assert store.find_access_points([wanted, "00:11:22:33:00:07"]) == {
        wanted: KnownAccessPoint(Point(52.5, 13.4))
    }


def test_a_later_row_replaces_an_earlier_one() -> None:
    store = MemoryStore()
    import_access_points(
        store,
        KEYS,
        ["bssid,lat,lon\n", "00:11:22:33:44:55,1,1\n", "00-11-22-33-44-55,2,2\n"],
    )
    assert store.count_access_points() == 1
    found = store.find_access_points([KEYS.hash_bssid("00:11:22:33:44:55")])
    assert [ap.point for ap in found.values()] == [Point(2, 2)]


def test_import_refuses_nonsense_batch_sizes() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        import_access_points(MemoryStore(), KEYS, [], batch_size=0)
