"""Each official index's advice per group (issue 33): every category of every index has the
general population's advice and advice for each group the index names, in the index's own
wording (spot-checked below against the documents, each phrase with its source), each text
with a source."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleanair_core.air.indexes import OfficialIndex, eu_eaqi, uk_daqi, us_epa
from cleanair_core.air.indexes.advice import (
    GROUPS,
    Group,
    advice_of,
    category_number,
    group_advice,
    pick,
)
from cleanair_core.air.indexes.registry import OFFICIAL_INDEXES
from cleanair_core.air.pollutants import Pollutant

CATEGORIES = {
    us_epa.CODE: len(us_epa.CATEGORIES),
    eu_eaqi.CODE: len(eu_eaqi.BANDS),
    uk_daqi.CODE: len(uk_daqi.BANDS),
}
EPA_POLLUTANTS: list[Pollutant | None] = [None, *Pollutant]

# The documents the phrases below are checked against.
TAD = "US EPA, AQI Technical Assistance Document (EPA-454/B-18-007), cautionary statements"
EEA = "EEA, FAQ 'What do the air quality index values mean?' (health messages)"
DEFRA = "Defra, uk-air DAQI page, health advice for at-risk individuals and the general population"

#: (index, category, pollutant, group, a phrase the text must hold, its source).
OFFICIAL_PHRASES = [
    (us_epa.CODE, 2, Pollutant.PM25, Group.HEART_OR_LUNG_DISEASE,
     "People with heart or lung disease, older adults, children, and people of lower "
     "socioeconomic status should reduce prolonged or heavy exertion", f"{TAD}, PM2.5"),
    (us_epa.CODE, 2, Pollutant.PM10, Group.OLDER_ADULTS,
     "should reduce prolonged or heavy exertion", f"{TAD}, PM10"),
    (us_epa.CODE, 3, Pollutant.PM25, Group.OUTDOOR_WORKERS,
     "everyone else should reduce prolonged or heavy exertion", f"{TAD}, PM2.5"),
    (us_epa.CODE, 5, Pollutant.PM25, Group.CHILDREN_AND_TEENS,
     "should remain indoors and keep activity levels low", f"{TAD}, PM2.5"),
    (us_epa.CODE, 2, Pollutant.O3, Group.OUTDOOR_WORKERS,
     "people who are active outdoors (including outdoor workers)", f"{TAD}, ozone"),
    (us_epa.CODE, 2, Pollutant.O3, Group.ACTIVE_PEOPLE,
     "should reduce prolonged or heavy outdoor exertion", f"{TAD}, ozone"),
    (us_epa.CODE, 1, Pollutant.O3, Group.HEART_OR_LUNG_DISEASE,
     "Unusually sensitive people should consider reducing prolonged or heavy outdoor "
     "exertion", f"{TAD}, ozone"),
    (us_epa.CODE, 2, Pollutant.NO2, Group.CHILDREN_AND_TEENS,
     "People with asthma, children and older adults should limit prolonged exertion "
     "especially near busy roads", f"{TAD}, NO2"),
    (us_epa.CODE, 3, Pollutant.SO2, Group.CHILDREN_AND_TEENS,
     "Children, people with asthma, or other lung diseases, should limit outdoor exertion",
     f"{TAD}, SO2"),
    (eu_eaqi.CODE, 0, None, Group.GENERAL,
     "The air quality is good. Enjoy your usual outdoor activities.", EEA),
    (eu_eaqi.CODE, 2, None, Group.SENSITIVE,
     "Consider reducing intense outdoor activities, if you experience symptoms.", EEA),
    (eu_eaqi.CODE, 3, None, Group.GENERAL,
     "Consider reducing intense activities outdoors, if you experience symptoms such as sore "
     "eyes, a cough or sore throat.", EEA),
    (eu_eaqi.CODE, 4, None, Group.GENERAL,  # Very poor: the same words as Poor
     "Consider reducing intense activities outdoors, if you experience symptoms such as sore "
     "eyes, a cough or sore throat.", EEA),
    (eu_eaqi.CODE, 4, None, Group.SENSITIVE,
     "Reduce physical activities, particularly outdoors, especially if you experience "
     "symptoms.", EEA),
    (eu_eaqi.CODE, 5, None, Group.SENSITIVE, "Avoid physical activities outdoors.", EEA),
    (uk_daqi.CODE, 0, None, Group.AT_RISK, "Enjoy your usual outdoor activities.", DEFRA),
    (uk_daqi.CODE, 1, None, Group.AT_RISK,
     "who experience symptoms, should consider reducing strenuous physical activity, "
     "particularly outdoors.", DEFRA),
    (uk_daqi.CODE, 2, None, Group.GENERAL,
     "Anyone experiencing discomfort such as sore eyes, cough or sore throat should consider "
     "reducing activity, particularly outdoors.", DEFRA),
    (uk_daqi.CODE, 2, None, Group.AT_RISK, "Older people should also reduce physical exertion.",
     DEFRA),
    (uk_daqi.CODE, 3, None, Group.AT_RISK,
     "Adults and children with lung problems, adults with heart problems, and older people, "
     "should avoid strenuous physical activity.", DEFRA),
    (uk_daqi.CODE, 3, None, Group.GENERAL,
     "Reduce physical exertion, particularly outdoors, especially if you experience symptoms "
     "such as cough or sore throat.", DEFRA),
]  # fmt: skip


def every_category() -> list[tuple[str, int, Pollutant | None]]:
    return [
        (code, category, pollutant)
        for code, count in CATEGORIES.items()
        for category in range(count)
        for pollutant in (EPA_POLLUTANTS if code == us_epa.CODE else [None])
    ]


@pytest.mark.parametrize(("code", "category", "pollutant"), every_category())
def test_every_category_has_general_advice_and_each_named_groups(
    code: str, category: int, pollutant: Pollutant | None
) -> None:
    advice = group_advice(code, category, pollutant)
    assert [a.group for a in advice] == [Group.GENERAL, *GROUPS[code]]
    for entry in advice:
        assert entry.text.strip()
        assert entry.text.endswith(".")
        assert entry.source.document
        assert entry.source.url.startswith("https://")


def test_each_index_names_its_own_groups() -> None:
    assert GROUPS == {
        us_epa.CODE: (
            Group.HEART_OR_LUNG_DISEASE,
            Group.OLDER_ADULTS,
            Group.CHILDREN_AND_TEENS,
            Group.OUTDOOR_WORKERS,
            Group.ACTIVE_PEOPLE,
        ),
        eu_eaqi.CODE: (Group.SENSITIVE,),
        uk_daqi.CODE: (Group.AT_RISK,),
    }
    assert set(GROUPS) == {index.code for index in OFFICIAL_INDEXES}


@pytest.mark.parametrize(
    ("code", "category", "pollutant", "group", "phrase", "source"),
    OFFICIAL_PHRASES,
    ids=[f"{c}-{n}-{p}-{g}" for c, n, p, g, *_ in OFFICIAL_PHRASES],
)
def test_texts_hold_the_official_wording(
    code: str, category: int, pollutant: Pollutant | None, group: Group, phrase: str, source: str
) -> None:
    entry = pick(group_advice(code, category, pollutant), group)
    assert entry.group is group
    assert phrase in entry.text, source
    assert not entry.source.summary


@pytest.mark.parametrize(
    ("category", "pollutant", "group"),
    [
        (2, Pollutant.PM25, Group.OUTDOOR_WORKERS),  # the PM statement names no workers
        (2, Pollutant.PM25, Group.ACTIVE_PEOPLE),
        (2, Pollutant.SO2, Group.CHILDREN_AND_TEENS),  # SO2's USG names people with asthma
        (0, Pollutant.O3, Group.OLDER_ADULTS),  # Good: the TAD has no statement
        (1, Pollutant.SO2, Group.HEART_OR_LUNG_DISEASE),  # nor for SO2 at Moderate
    ],
)
def test_an_epa_group_its_pollutants_statement_does_not_name_gets_the_general_advice(
    category: int, pollutant: Pollutant, group: Group
) -> None:
    advice = group_advice(us_epa.CODE, category, pollutant)
    assert pick(advice, group).text == advice[0].text == us_epa.CATEGORIES[category][3]


def test_without_the_pollutant_the_epa_groups_get_the_summary_said_as_one() -> None:
    advice = group_advice(us_epa.CODE, 3)
    assert {a.text for a in advice[1:]} == {us_epa.CATEGORIES[3][4]}
    assert all(a.source.summary for a in advice)


def test_a_group_the_index_does_not_name_is_answered_with_the_general_advice() -> None:
    advice = group_advice(eu_eaqi.CODE, 3)
    assert pick(advice, Group.OLDER_ADULTS) == advice[0]
    assert pick(advice, Group.OLDER_ADULTS).group is Group.GENERAL


def test_unknown_indexes_and_categories_are_refused() -> None:
    with pytest.raises(ValueError, match="not an index"):
        group_advice("zq_index", 0)
    with pytest.raises(ValueError, match="not a category"):
        group_advice(eu_eaqi.CODE, 6)
    with pytest.raises(ValueError, match="not a category"):
        group_advice(us_epa.CODE, -1)


def test_an_index_value_carries_its_dominant_pollutants_statement() -> None:
    value = us_epa.us_epa_aqi({Pollutant.PM25: [40.0]})  # 40 µg/m³: USG, by PM2.5
    assert value is not None
    assert value.category == "Unhealthy for Sensitive Groups"
    advice = advice_of(value)
    assert pick(advice, Group.HEART_OR_LUNG_DISEASE).text.startswith(
        "People with heart or lung disease, older adults, children"
    )
    assert "particle pollution" in pick(advice, Group.OLDER_ADULTS).source.section


HISTORY = st.dictionaries(
    st.sampled_from(list(Pollutant)),
    st.lists(st.one_of(st.none(), st.floats(0, 2000)), min_size=1, max_size=30),
)


@given(HISTORY, st.sampled_from(OFFICIAL_INDEXES))
def test_advice_agrees_with_the_index_value_it_is_for(
    history: dict[Pollutant, list[float | None]], index: OfficialIndex
) -> None:
    value = index.compute(history)
    if value is None:
        return
    number = category_number(value)
    advice = advice_of(value)
    assert advice[0].group is Group.GENERAL
    assert advice[0].text == value.health.general
    assert [a.group for a in advice[1:]] == list(GROUPS[value.code])
    if value.code != us_epa.CODE:
        assert advice[1].text == value.health.sensitive
    names = {
        us_epa.CODE: [c[1] for c in us_epa.CATEGORIES],
        eu_eaqi.CODE: [b[0] for b in eu_eaqi.BANDS],
        uk_daqi.CODE: [b[1] for b in uk_daqi.BANDS],
    }[value.code]
    assert names[number] == value.category
