"""Each official index's advice for the general population and for each group it names, in
the index's own wording, each text with the document it comes from (docs/indexes.md lists
the sources per index and group).

The groups are a stable vocabulary (`Group`); each index names its own: the US EPA AQI the
five groups its cautionary statements speak to, the EEA's index its "sensitive
populations", the UK DAQI its "at-risk individuals". The US EPA's statements depend on the
pollutant that set the AQI: a group the statement names gets it word for word, a group it
does not name gets the general advice. Where the pollutant is not known (an alert), each
EPA group gets the module's summary for sensitive groups, said as a summary in its source.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

import attrs

from cleanair_core.air.indexes import IndexValue, eu_eaqi, uk_daqi, us_epa
from cleanair_core.air.pollutants import Pollutant

T = TypeVar("T")


class Group(StrEnum):
    """Who an advice text is for. Stable ids: clients ask for one by its id."""

    GENERAL = "general"
    HEART_OR_LUNG_DISEASE = "heart_or_lung_disease"
    OLDER_ADULTS = "older_adults"
    CHILDREN_AND_TEENS = "children_and_teens"
    OUTDOOR_WORKERS = "outdoor_workers"
    ACTIVE_PEOPLE = "active_people"
    SENSITIVE = "sensitive"
    AT_RISK = "at_risk"


@attrs.frozen
class Source:
    """Where a text comes from: the document, the part of it, and its address."""

    document: str
    section: str
    url: str
    #: True where the text is the service's summary of the document, not its wording.
    summary: bool = False


@attrs.frozen
class GroupAdvice:
    """One index's advice for one group at one category."""

    group: Group
    text: str
    source: Source


_EPA_GROUPS = (
    Group.HEART_OR_LUNG_DISEASE,
    Group.OLDER_ADULTS,
    Group.CHILDREN_AND_TEENS,
    Group.OUTDOOR_WORKERS,
    Group.ACTIVE_PEOPLE,
)

#: The groups each index names (besides the general population), in the order it names them.
GROUPS: dict[str, tuple[Group, ...]] = {
    us_epa.CODE: _EPA_GROUPS,
    eu_eaqi.CODE: (Group.SENSITIVE,),
    uk_daqi.CODE: (Group.AT_RISK,),
}

_TAD = (
    "US EPA, Technical Assistance Document for the Reporting of Daily Air Quality: the Air "
    "Quality Index (AQI), EPA-454/B-18-007 (2018)"
)
_TAD_URL = (
    "https://www.airnow.gov/sites/default/files/2020-05/"
    "aqi-technical-assistance-document-sept2018.pdf"
)
EPA_SUMMARY = Source(
    _TAD, "AQI categories and cautionary statements (the service's summary)", _TAD_URL, True
)
EEA = Source(
    "European Environment Agency, European Air Quality Index: health messages",
    "FAQ 'What do the air quality index values mean?'; the index viewer",
    "https://airindex.eea.europa.eu/",
)
DEFRA = Source(
    "Defra, Daily Air Quality Index: health advice",
    "uk-air DAQI page, 'Health advice' (at-risk individuals, general population)",
    "https://uk-air.defra.gov.uk/air-pollution/daqi?view=more-info",
)

_PM_SENSITIVE = frozenset(
    {Group.HEART_OR_LUNG_DISEASE, Group.OLDER_ADULTS, Group.CHILDREN_AND_TEENS}
)
_O3_SENSITIVE = frozenset(_EPA_GROUPS)  # lung disease, children, older adults, active outdoors
_ALL = frozenset(_EPA_GROUPS)  # a statement that also speaks to "everyone else"
_NONE: frozenset[Group] = frozenset()

#: The TAD's cautionary statements per pollutant and category (Good..Hazardous): the text
#: and the groups it speaks to. "Unusually sensitive people" (Moderate) are taken to be the
#: pollutant's sensitive groups; a statement with "everyone else" speaks to every group.
_PM_STATEMENTS: tuple[tuple[str | None, frozenset[Group]], ...] = (
    (None, _NONE),
    ("Unusually sensitive people should consider reducing prolonged or heavy exertion.",
     _PM_SENSITIVE),
    ("People with heart or lung disease, older adults, children, and people of lower "
     "socioeconomic status should reduce prolonged or heavy exertion.", _PM_SENSITIVE),
    ("People with heart or lung disease, older adults, children, and people of lower "
     "socioeconomic status should avoid prolonged or heavy exertion; everyone else should "
     "reduce prolonged or heavy exertion.", _ALL),
    ("People with heart or lung disease, older adults, children, and people of lower "
     "socioeconomic status should avoid all physical activity outdoors. Everyone else should "
     "avoid prolonged or heavy exertion.", _ALL),
    ("Everyone should avoid all physical activity outdoors; people with heart or lung "
     "disease, older adults, children, and people of lower socioeconomic status should "
     "remain indoors and keep activity levels low.", _ALL),
)  # fmt: skip
_O3_GROUPS_TEXT = (
    "People with lung disease (such as asthma), children, older adults, people who are active "
    "outdoors (including outdoor workers), people with certain genetic variants, and people "
    "with diets limited in certain nutrients"
)
_O3_STATEMENTS: tuple[tuple[str | None, frozenset[Group]], ...] = (
    (None, _NONE),
    ("Unusually sensitive people should consider reducing prolonged or heavy outdoor "
     "exertion.", _O3_SENSITIVE),
    (f"{_O3_GROUPS_TEXT} should reduce prolonged or heavy outdoor exertion.", _O3_SENSITIVE),
    (f"{_O3_GROUPS_TEXT} should avoid prolonged or heavy outdoor exertion; everyone else "
     "should reduce prolonged or heavy outdoor exertion.", _ALL),
    (f"{_O3_GROUPS_TEXT} should avoid all outdoor exertion; everyone else should reduce "
     "outdoor exertion.", _ALL),
    ("Everyone should avoid all outdoor exertion.", _ALL),
)  # fmt: skip
_NO2_SENSITIVE = frozenset(
    {Group.HEART_OR_LUNG_DISEASE, Group.CHILDREN_AND_TEENS, Group.OLDER_ADULTS}
)
_NO2_STATEMENTS: tuple[tuple[str | None, frozenset[Group]], ...] = (
    (None, _NONE),
    ("Unusually sensitive individuals should consider limiting prolonged exertion especially "
     "near busy roads.", _NO2_SENSITIVE),
    ("People with asthma, children and older adults should limit prolonged exertion "
     "especially near busy roads.", _NO2_SENSITIVE),
    ("People with asthma, children and older adults should avoid prolonged exertion near "
     "roadways; everyone else should limit prolonged exertion especially near busy roads.",
     _ALL),
    ("People with asthma, children and older adults should avoid all outdoor exertion; "
     "everyone else should avoid prolonged exertion especially near busy roads.", _ALL),
    ("People with asthma, children and older adults should remain indoors; everyone else "
     "should avoid all outdoor exertion.", _ALL),
)  # fmt: skip
_SO2_STATEMENTS: tuple[tuple[str | None, frozenset[Group]], ...] = (
    (None, _NONE),
    (None, _NONE),
    ("People with asthma should consider limiting outdoor exertion.",
     frozenset({Group.HEART_OR_LUNG_DISEASE})),
    ("Children, people with asthma, or other lung diseases, should limit outdoor exertion.",
     frozenset({Group.HEART_OR_LUNG_DISEASE, Group.CHILDREN_AND_TEENS})),
    ("Children, people with asthma, or other lung diseases should avoid outdoor exertion; "
     "everyone else should reduce outdoor exertion.", _ALL),
    ("Children, people with asthma, or other lung diseases, should remain indoors; everyone "
     "else should avoid outdoor exertion.", _ALL),
)  # fmt: skip

#: Per pollutant: its cautionary statements and the part of the TAD they come from.
EPA_STATEMENTS: dict[Pollutant, tuple[tuple[tuple[str | None, frozenset[Group]], ...], str]] = {
    Pollutant.PM25: (_PM_STATEMENTS, "Table 4, cautionary statements: particle pollution (PM2.5)"),
    Pollutant.PM10: (_PM_STATEMENTS, "Table 4, cautionary statements: particle pollution (PM10)"),
    Pollutant.O3: (_O3_STATEMENTS, "Table 4, cautionary statements: ozone"),
    Pollutant.NO2: (_NO2_STATEMENTS, "Table 4, cautionary statements: nitrogen dioxide"),
    Pollutant.SO2: (_SO2_STATEMENTS, "Table 4, cautionary statements: sulfur dioxide"),
}


def category_number(index: IndexValue) -> int:
    """The index value's category, 0 the best, as `group_advice` and alerts count them."""
    if index.code == us_epa.CODE:
        return next(i for i, c in enumerate(us_epa.CATEGORIES) if index.value <= c[0])
    if index.code == eu_eaqi.CODE:
        return index.value - 1
    if index.code == uk_daqi.CODE:
        return next(i for i, b in enumerate(uk_daqi.BANDS) if index.value <= b[0])
    raise ValueError("not an index the service computes")


def group_advice(
    code: str, category: int, pollutant: Pollutant | None = None
) -> tuple[GroupAdvice, ...]:
    """The advice of the index coded `code` at `category` (0 the best): the general
    population's first, then each group the index names, in its order. `pollutant` is the
    one that set the value (the US EPA's statements depend on it; None where unknown).
    ValueError for an unknown index or a category it does not have."""
    if code == us_epa.CODE:
        return _epa(category, pollutant)
    if code == eu_eaqi.CODE:
        _, _, general, sensitive = _nth(eu_eaqi.BANDS, category)
        return (
            GroupAdvice(Group.GENERAL, general, EEA),
            GroupAdvice(Group.SENSITIVE, sensitive, EEA),
        )
    if code == uk_daqi.CODE:
        _, _, general, at_risk = _nth(uk_daqi.BANDS, category)
        return (
            GroupAdvice(Group.GENERAL, general, DEFRA),
            GroupAdvice(Group.AT_RISK, at_risk, DEFRA),
        )
    raise ValueError("not an index the service computes")


def advice_of(index: IndexValue) -> tuple[GroupAdvice, ...]:
    """`group_advice` for an index value, with the pollutant that set it."""
    return group_advice(index.code, category_number(index), index.dominant_pollutant)


def pick(advice: tuple[GroupAdvice, ...], group: Group) -> GroupAdvice:
    """The advice for `group`, or the general population's where the index does not name
    the group (the entry's `group` says which it is)."""
    return next((a for a in advice if a.group is group), advice[0])


def _nth(rows: tuple[T, ...], category: int) -> T:
    if not 0 <= category < len(rows):
        raise ValueError("not a category of that index")
    return rows[category]


def _epa(category: int, pollutant: Pollutant | None) -> tuple[GroupAdvice, ...]:
    _, _, _, general, sensitive = _nth(us_epa.CATEGORIES, category)
    everyone = GroupAdvice(Group.GENERAL, general, EPA_SUMMARY)
    known = EPA_STATEMENTS.get(pollutant) if pollutant is not None else None
    if known is None:
        return (everyone, *(GroupAdvice(g, sensitive, EPA_SUMMARY) for g in _EPA_GROUPS))
    statements, section = known
    text, named = statements[category]
    source = Source(_TAD, section, _TAD_URL)
    return (
        everyone,
        *(
            GroupAdvice(g, text, source)
            if text is not None and g in named
            else GroupAdvice(g, general, EPA_SUMMARY)
            for g in _EPA_GROUPS
        ),
    )
