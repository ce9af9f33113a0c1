"""The Clean Air Score formula and its bands."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleanair_core.air.pollutants import SCORED, Pollutant
from cleanair_core.air.score import (
    BANDS,
    EEA_2024_BOUNDS,
    band_of,
    clean_air_score,
    sub_index,
)

concentration = st.floats(min_value=0, max_value=2000, allow_nan=False)
airs = st.dictionaries(st.sampled_from(SCORED), concentration | st.none(), max_size=5)


@pytest.mark.parametrize(
    ("air", "expected"),
    [
        ({Pollutant.PM25: 0.0}, 100),
        ({Pollutant.PM25: 2.5}, 90),  # half way through the first EEA band
        ({Pollutant.PM25: 5.0}, 80),  # the top of "good" is still Excellent
        ({Pollutant.PM25: 10.0}, 70),
        ({Pollutant.PM25: 15.0}, 60),
        ({Pollutant.NO2: 42.5}, 50),
        ({Pollutant.O3: 170.0}, 10),
        ({Pollutant.SO2: 275.0}, 0),
        ({Pollutant.PM10: 1000.0}, 0),  # extremely poor clamps to 0
        ({Pollutant.PM25: 5.0, Pollutant.NO2: 60.0}, 40),  # the worst pollutant decides
        ({Pollutant.PM25: -3.0}, 100),  # a negative reading counts as zero
    ],
)
def test_anchor_values(air: dict[Pollutant, float], expected: int) -> None:
    assert clean_air_score(air) == expected


def test_the_score_rounds_down_so_it_never_looks_cleaner() -> None:
    # 5.01 µg/m³ PM2.5 is past the EEA "good" band: 79.98 must not round up into Excellent.
    assert clean_air_score({Pollutant.PM25: 5.01}) == 79


def test_unknown_values_are_left_out_not_guessed() -> None:
    assert clean_air_score({}) is None
    assert clean_air_score({Pollutant.PM25: None, Pollutant.O3: None}) is None
    assert clean_air_score({Pollutant.PM25: math.nan}) is None
    assert clean_air_score({Pollutant.PM25: None, Pollutant.NO2: 25.0}) == 60
    # Measures without EEA bands never enter the score.
    assert clean_air_score({Pollutant.CO2: 5000.0, Pollutant.TVOC: 900.0}) is None


@given(airs, st.sampled_from(SCORED), st.floats(min_value=0, max_value=500))
def test_the_score_never_rises_when_a_concentration_rises(
    air: dict[Pollutant, float | None], pollutant: Pollutant, increase: float
) -> None:
    before = clean_air_score(air)
    worse = dict(air)
    worse[pollutant] = (air.get(pollutant) or 0.0) + increase
    after = clean_air_score(worse)
    assert after is not None
    assert before is None or after <= before


@given(airs)
def test_the_score_is_the_worst_single_pollutant_score(air: dict[Pollutant, float | None]) -> None:
    singles = [clean_air_score({p: c}) for p, c in air.items() if c is not None]
    expected = min((s for s in singles if s is not None), default=None)
    assert clean_air_score(air) == expected


@given(st.sampled_from(SCORED), concentration)
def test_sub_index_stays_within_0_and_100(pollutant: Pollutant, value: float) -> None:
    assert 0.0 <= sub_index(pollutant, value) <= 100.0


@given(st.integers(min_value=0, max_value=100))
def test_every_score_falls_in_exactly_one_band(score: int) -> None:
    containing = [
        band
        for i, band in enumerate(BANDS)
        if band.lowest_score <= score < (BANDS[i - 1].lowest_score if i else 101)
    ]
    assert containing == [band_of(score)]


def test_bands_run_from_excellent_to_very_poor() -> None:
    assert [(b.number, b.label) for b in BANDS] == [
        (1, "Excellent"),
        (2, "Good"),
        (3, "Moderate"),
        (4, "Poor"),
        (5, "Very Poor"),
    ]
    assert all(b.colour.startswith("#") and len(b.colour) == 7 for b in BANDS)
    assert band_of(100).label == "Excellent"
    assert band_of(80).label == "Excellent"
    assert band_of(79.9).label == "Good"
    assert band_of(19.99).label == "Very Poor"
    assert band_of(0).label == "Very Poor"


@pytest.mark.parametrize("score", [-0.1, 100.1, math.nan])
def test_band_of_refuses_scores_outside_the_scale(score: float) -> None:
    with pytest.raises(ValueError, match=r"0\.\.100"):
        band_of(score)


@pytest.mark.parametrize("pollutant", SCORED)
def test_each_eea_band_lands_in_the_matching_band(pollutant: Pollutant) -> None:
    lower = 0.0
    for eea_band, upper in enumerate(EEA_2024_BOUNDS[pollutant]):
        middle = (lower + upper) / 2
        score = clean_air_score({pollutant: middle})
        assert score is not None
        assert band_of(score).number == eea_band + 1
        lower = upper


def test_the_band_table_in_the_docs_matches_the_code() -> None:
    docs = Path(__file__).parents[2] / "docs" / "science.md"
    rows = re.findall(
        r"^\| (\d) \| ([A-Za-z ]+?) \| (\d+)-(\d+) \| `(#[0-9A-F]{6})` \|", docs.read_text(), re.M
    )
    documented = [(int(n), label, int(low), colour) for n, label, low, _, colour in rows]
    assert documented == [(b.number, b.label, b.lowest_score, b.colour) for b in BANDS]
