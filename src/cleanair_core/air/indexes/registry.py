"""The official indexes the service computes, and which applies where."""

from __future__ import annotations

from collections.abc import Sequence

from cleanair_core.air.indexes import OfficialIndex
from cleanair_core.air.indexes.eu_eaqi import eu_eaqi
from cleanair_core.air.indexes.uk_daqi import uk_daqi
from cleanair_core.air.indexes.us_epa import us_epa_aqi

#: The member countries of the European Environment Agency, whose index the EAQI is.
EEA_MEMBERS = frozenset(
    {
        "AT", "BE", "BG", "CH", "CY", "CZ", "DE", "DK", "EE", "ES", "FI", "FR", "GR", "HR", "HU",
        "IE", "IS", "IT", "LI", "LT", "LU", "LV", "MT", "NL", "NO", "PL", "PT", "RO", "SE", "SI",
        "SK", "TR",
    }
)  # fmt: skip

OFFICIAL_INDEXES: tuple[OfficialIndex, ...] = (
    OfficialIndex(
        "us_epa_2024",
        "US EPA Air Quality Index (2024)",
        frozenset({"US", "PR", "GU", "VI", "AS", "MP"}),
        us_epa_aqi,
        hours_needed=24,
    ),
    OfficialIndex(
        "eu_eaqi_2024", "European Air Quality Index (EEA, 2024)", EEA_MEMBERS, eu_eaqi, 1
    ),
    OfficialIndex("uk_daqi", "UK Daily Air Quality Index", frozenset({"GB"}), uk_daqi, 24),
)
INDEX_CODES: tuple[str, ...] = tuple(index.code for index in OFFICIAL_INDEXES)


def indexes_for(country: str | None, codes: Sequence[str] | None = None) -> list[OfficialIndex]:
    """The indexes asked for by `codes` (in that order; unknown codes are the caller's to
    refuse), else the official index of `country` where there is one, else all of them."""
    by_code = {index.code: index for index in OFFICIAL_INDEXES}
    if codes:
        return [by_code[code] for code in codes if code in by_code]
    official = [index for index in OFFICIAL_INDEXES if country in index.countries]
    return official or list(OFFICIAL_INDEXES)
