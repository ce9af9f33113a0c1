"""The explorer's alerts panel (assets/alerts.js) names thresholds by the categories the
service uses: its table must be the indexes' own, in order, for every index a subscription
may name (issue 32)."""

from __future__ import annotations

import json
import re
from importlib.resources import files

from cleanair_core.air.indexes import eu_eaqi, uk_daqi, us_epa
from cleanair_core.air.indexes.registry import INDEX_CODES
from cleanair_core.alerts.messages import index_category
from cleanair_core.alerts.subscriptions import DEFAULT_INDEX_CATEGORIES, INDEX_CATEGORIES

SCRIPT = files("cleanair_http.explore").joinpath("assets", "alerts.js").read_text()


def panel_table() -> dict[str, dict[str, object]]:
    found = re.search(
        r"// index-categories:begin\s+const INDEXES = (\{.*?\});\s+// index-categories:end",
        SCRIPT,
        re.DOTALL,
    )
    assert found, "alerts.js lost its index-categories table"
    table: dict[str, dict[str, object]] = json.loads(found.group(1))
    return table


def test_the_panel_names_every_index_a_subscription_may_name() -> None:
    assert set(panel_table()) == set(INDEX_CODES) == set(INDEX_CATEGORIES)


def test_each_category_is_named_as_alerts_name_it() -> None:
    for code, entry in panel_table().items():
        names = entry["categories"]
        assert isinstance(names, list)
        assert len(names) == INDEX_CATEGORIES[code]
        assert names == [index_category(code, n).name for n in range(len(names))]


def test_the_index_codes_offered_are_the_panels() -> None:
    page = files("cleanair_http.explore").joinpath("assets", "index.html").read_text()
    select = re.search(r'<select id="alert-index">(.*?)</select>', page, re.DOTALL)
    assert select
    offered = re.findall(r'<option value="([^"]*)">', select.group(1))
    # The place's own first (the default), then each index the panel names.
    assert offered[0] == ""
    assert sorted(offered[1:]) == sorted(panel_table())
    assert {eu_eaqi.CODE, us_epa.CODE, uk_daqi.CODE} == set(offered[1:])


def test_without_a_named_index_the_panel_offers_what_fits_every_index() -> None:
    # The script offers the fewest categories of its table for the place's own index.
    assert "Math.min(...Object.values(INDEXES).map((i) => i.categories.length))" in SCRIPT
    assert min(len(e["categories"]) for e in panel_table().values()) == DEFAULT_INDEX_CATEGORIES  # type: ignore[arg-type]
