"""Official indexes against their documents' tables (US EPA 2024 TAD Table 6, the EEA's 2024
bands, Defra's DAQI bands) and rules (truncation, NowCast, averaging periods)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleanair_core.air.indexes import Averaging, IndexValue
from cleanair_core.air.indexes import eu_eaqi as eu
from cleanair_core.air.indexes import uk_daqi as uk
from cleanair_core.air.indexes import us_epa as us
from cleanair_core.air.indexes.registry import INDEX_CODES, indexes_for
from cleanair_core.air.pollutants import Pollutant
from cleanair_core.air.units import ugm3_from_ppb


def only(pollutant: Pollutant, *values: float | None) -> dict[Pollutant, list[float | None]]:
    return {pollutant: list(values)}


def aqi(pollutant: Pollutant, *values: float | None) -> IndexValue:
    found = us.us_epa_aqi(only(pollutant, *values))
    assert found is not None
    return found


# -- US EPA AQI (2024)


@pytest.mark.parametrize(("c_lo", "c_hi", "i_lo", "i_hi"), us.PM25)
def test_pm25_rows_of_table_6(c_lo: float, c_hi: float, i_lo: int, i_hi: int) -> None:
    # Twelve equal hours: the NowCast is that value.
    assert aqi(Pollutant.PM25, *[c_lo] * 12).value == i_lo
    assert aqi(Pollutant.PM25, *[c_hi] * 12).value == i_hi


@pytest.mark.parametrize(("c_lo", "c_hi", "i_lo", "i_hi"), us.PM10)
def test_pm10_rows_of_table_6(c_lo: float, c_hi: float, i_lo: int, i_hi: int) -> None:
    assert aqi(Pollutant.PM10, *[c_lo] * 12).value == i_lo
    assert aqi(Pollutant.PM10, *[c_hi + 0.9] * 12).value == i_hi  # truncated to 1 µg/m³


@pytest.mark.parametrize(("c_lo", "c_hi", "i_lo", "i_hi"), us.NO2_1H)
def test_no2_rows_of_table_6(c_lo: float, c_hi: float, i_lo: int, i_hi: int) -> None:
    assert aqi(Pollutant.NO2, ugm3_from_ppb(Pollutant.NO2, c_lo)).value == i_lo
    assert aqi(Pollutant.NO2, ugm3_from_ppb(Pollutant.NO2, c_hi + 0.9)).value == i_hi


@pytest.mark.parametrize(("c_lo", "c_hi", "i_lo", "i_hi"), us.O3_8H)
def test_ozone_8h_rows_of_table_6(c_lo: float, c_hi: float, i_lo: int, i_hi: int) -> None:
    # Eight equal hours below 0.125 ppm: the 8-hour mean decides.
    for ppm, expected in ((c_lo, i_lo), (c_hi, i_hi)):
        ugm3 = ugm3_from_ppb(Pollutant.O3, ppm * 1000.0)
        if ppm < 0.125:
            found = aqi(Pollutant.O3, *[ugm3] * 8)
            assert found.value == expected
            assert found.concentrations[Pollutant.O3].averaging is Averaging.EIGHT_HOURS


def test_the_equation_and_its_rounding() -> None:
    # PM2.5 35.9: (150 - 101) / (55.4 - 35.5) * (35.9 - 35.5) + 101 = 101.98 -> 102.
    assert aqi(Pollutant.PM25, *[35.9] * 12).value == 102
    # O3 0.078 ppm over 8 h: 49 / 0.014 * 0.007 + 101 = 125.5 -> 126 (halves up).
    assert aqi(Pollutant.O3, *[ugm3_from_ppb(Pollutant.O3, 78.0)] * 8).value == 126
    # Truncation, not rounding: 9.09 is 9.0 (Good, 50), not 9.1 (Moderate).
    assert aqi(Pollutant.PM25, *[9.09] * 12).value == 50
    assert aqi(Pollutant.PM25, *[9.1] * 12).value == 51


def test_beyond_the_top_breakpoint_is_500() -> None:
    assert aqi(Pollutant.PM25, *[400.0] * 12).value == 500
    assert aqi(Pollutant.PM25, *[400.0] * 12).category == "Hazardous"


def test_the_one_hour_ozone_value_counts_where_it_is_more_precautionary() -> None:
    clean = ugm3_from_ppb(Pollutant.O3, 40.0)
    spike = ugm3_from_ppb(Pollutant.O3, 170.0)  # 0.170 ppm in the last hour: 1 h table, 157
    found = aqi(Pollutant.O3, *[clean] * 7, spike)
    assert found.value == us.sub_index(0.170, us.O3_1H) == 157
    assert found.concentrations[Pollutant.O3].averaging is Averaging.HOUR


def test_nowcast_weights_and_validity() -> None:
    # c1 = 10 (latest), c2 = 20: w = max(10/20, 0.5) = 0.5, (10 + 0.5·20) / 1.5 = 13.33.
    assert us.nowcast([20.0, 10.0]) == pytest.approx(40.0 / 3.0)
    # A wide range floors the weight at 0.5: c1 = 5, c2 = 50 gives (5 + 25) / 1.5 = 20.
    assert us.nowcast([50.0, 5.0]) == pytest.approx(20.0)
    # w = 0.8 (c_min 40, c_max 50) over three hours: (40 + 0.8·50 + 0.64·45) / 2.44.
    assert us.nowcast([45.0, 50.0, 40.0]) == pytest.approx((40 + 40 + 28.8) / 2.44)
    # Only the last 12 hours count.
    assert us.nowcast([1000.0] + [30.0] * 12) == pytest.approx(30.0)
    # 2 of the 3 latest hours must be there.
    assert us.nowcast([30.0, 30.0, None, None]) is None
    assert us.nowcast([30.0, None, 30.0, None]) is None
    assert us.nowcast([None, 30.0, None, 30.0]) == pytest.approx(30.0)
    found = aqi(Pollutant.PM25, *[20.0] * 12)
    assert found.concentrations[Pollutant.PM25].averaging is Averaging.NOWCAST


def test_without_a_valid_nowcast_the_hour_stands_in_and_says_so() -> None:
    found = aqi(Pollutant.PM25, 12.0)
    assert found.concentrations[Pollutant.PM25].averaging is Averaging.HOUR
    assert found.concentrations[Pollutant.PM25].concentration == 12.0


def test_the_aqi_is_the_highest_sub_index_with_its_pollutant_and_advice() -> None:
    history = {
        Pollutant.PM25: [5.0] * 12,
        Pollutant.NO2: [ugm3_from_ppb(Pollutant.NO2, 120.0)],
        Pollutant.O3: [60.0] * 8,
    }
    found = us.us_epa_aqi(history)
    assert found is not None
    assert found.dominant_pollutant is Pollutant.NO2
    assert found.value == us.sub_index(120, us.NO2_1H)
    assert found.category == "Unhealthy for Sensitive Groups"
    assert found.colour == "#FF7E00"
    assert set(found.concentrations) == {Pollutant.PM25, Pollutant.NO2, Pollutant.O3}
    assert "heart or lung disease" in found.health.sensitive
    assert us.us_epa_aqi({}) is None


def test_sulphur_above_304_ppb_takes_the_day_mean_where_known() -> None:
    high = ugm3_from_ppb(Pollutant.SO2, 400.0)
    assert aqi(Pollutant.SO2, high).value == 200  # an hour says "200 or more" only
    day = aqi(Pollutant.SO2, *[high] * 24)
    assert day.value == us.sub_index(400, us.SO2_24H)
    assert day.concentrations[Pollutant.SO2].averaging is Averaging.DAY


@given(st.floats(0.0, 600.0), st.floats(0.0, 600.0))
def test_the_aqi_never_falls_as_air_worsens(low: float, high: float) -> None:
    low, high = sorted((low, high))
    for pollutant in (Pollutant.PM25, Pollutant.PM10, Pollutant.NO2, Pollutant.O3):
        a, b = aqi(pollutant, *[low] * 12).value, aqi(pollutant, *[high] * 12).value
        assert 0 <= a <= b <= 500


# -- European Air Quality Index (2024)


@pytest.mark.parametrize("pollutant", list(eu.LIMITS))
def test_eaqi_bands_of_the_2024_revision(pollutant: Pollutant) -> None:
    for number, limit in enumerate(eu.LIMITS[pollutant], start=1):
        assert eu.band(pollutant, limit) == number  # a band's upper limit is in it
        assert eu.band(pollutant, limit + 0.01) == number + 1
    assert eu.band(pollutant, 0.0) == 1


def test_eaqi_is_the_worst_pollutants_band() -> None:
    found = eu.eu_eaqi(
        {Pollutant.PM25: [3.0], Pollutant.NO2: [70.0], Pollutant.O3: [110.0], Pollutant.SO2: [None]}
    )
    assert found is not None
    assert (found.value, found.category, found.colour) == (4, "Poor", "#FF5050")
    assert found.dominant_pollutant is Pollutant.NO2
    assert set(found.concentrations) == {Pollutant.PM25, Pollutant.NO2, Pollutant.O3}
    assert all(c.averaging is Averaging.HOUR for c in found.concentrations.values())
    assert found.health.general.startswith("Consider reducing intense activities outdoors")
    assert eu.eu_eaqi({Pollutant.NO2: [None]}) is None


def test_eaqi_uses_the_last_hour_not_an_old_one() -> None:
    found = eu.eu_eaqi({Pollutant.PM25: [200.0, 4.0]})
    assert found is not None
    assert found.value == 1


# -- UK DAQI


@pytest.mark.parametrize("pollutant", list(uk.LIMITS))
def test_daqi_bands_of_defra(pollutant: Pollutant) -> None:
    previous = -1
    for number, limit in enumerate(uk.LIMITS[pollutant], start=1):
        assert uk.index_of(pollutant, previous + 1) == number  # each band's first integer
        assert uk.index_of(pollutant, limit) == number
        previous = limit
    assert uk.index_of(pollutant, previous + 1) == 10


def test_daqi_rounds_to_an_integer_first() -> None:
    assert uk.index_of(Pollutant.PM25, 11.4) == 1
    assert uk.index_of(Pollutant.PM25, 11.5) == 2  # 12: index 2
    assert uk.index_of(Pollutant.NO2, 67.49) == 1


def test_daqi_averaging_periods() -> None:
    history: dict[Pollutant, list[float]] = {
        Pollutant.PM25: [80.0] * 6 + [10.0] * 18,  # running 24 h mean 27.5: index 3
        Pollutant.O3: [10.0] * 7 + [200.0],  # 8 h mean 33.75 -> 34: index 2
        Pollutant.NO2: [500.0, 100.0],  # the hour: index 2
    }
    found = uk.uk_daqi(history)
    assert found is not None
    assert found.value == 3
    assert found.dominant_pollutant is Pollutant.PM25
    assert found.concentrations[Pollutant.PM25].averaging is Averaging.DAY
    assert found.concentrations[Pollutant.PM25].concentration == pytest.approx(27.5)
    assert found.concentrations[Pollutant.O3].averaging is Averaging.EIGHT_HOURS
    assert found.concentrations[Pollutant.NO2].averaging is Averaging.HOUR
    assert (found.category, found.colour) == ("Low", "#31CF00")


def test_daqi_with_a_short_history_says_the_hour_was_used() -> None:
    found = uk.uk_daqi({Pollutant.PM25: [60.0, 60.0]})
    assert found is not None
    assert found.concentrations[Pollutant.PM25].averaging is Averaging.HOUR
    assert (found.value, found.category) == (8, "High")
    assert "reliever inhaler" in found.health.sensitive


# -- which index applies where


def test_each_country_gets_its_official_index_and_others_all() -> None:
    assert [i.code for i in indexes_for("US")] == ["us_epa_2024"]
    assert [i.code for i in indexes_for("FI")] == ["eu_eaqi_2024"]
    assert [i.code for i in indexes_for("GB")] == ["uk_daqi"]
    assert [i.code for i in indexes_for("JP")] == list(INDEX_CODES)
    assert [i.code for i in indexes_for(None)] == list(INDEX_CODES)
    assert [i.code for i in indexes_for("US", ["uk_daqi", "eu_eaqi_2024"])] == [
        "uk_daqi",
        "eu_eaqi_2024",
    ]
