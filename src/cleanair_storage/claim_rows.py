"""The stored form of the evaluation claims (`cleanair_core.alerts.rounds.EvaluationClaims`),
shared by the SQLite and PostgreSQL adapters: the columns of `subscriptions` a claim reads,
and how the migrations that add them back-fill each row's cell.

Beside each subscription the table keeps `next_evaluation_at` (when it is due: its
`created_at` when added), `cell` (`subscription_cell`, the text claims order by) and the
lease, `lease_claimant` and `lease_until` (NULL when none was taken, or once finished).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from cleanair_core.alerts.rounds import ClaimedSubscription, subscription_cell
from cleanair_core.alerts.subscriptions import StoredState
from cleanair_storage.subscription_rows import SUBSCRIPTION_COLUMNS, subscription_from_row

#: The columns `claimed_from_row` reads, in their order: the claim's order first (due time,
#: cell, id), then the subscription, then its state.
CLAIMED_COLUMNS = f"next_evaluation_at, cell, {SUBSCRIPTION_COLUMNS}, state_version, state"
#: Where the subscription's own columns start in a row of `CLAIMED_COLUMNS`.
_SUBSCRIPTION_START = 2


def claim_order(row: Sequence[Any]) -> tuple[Any, Any, Any]:
    """The sort key of a row of `CLAIMED_COLUMNS` (RETURNING gives rows in no promised
    order): due time, cell, then the id's text, as every adapter orders a claim."""
    return row[0], row[1], row[_SUBSCRIPTION_START]


def claimed_from_row(row: Sequence[Any], instant: Callable[[Any], datetime]) -> ClaimedSubscription:
    """The claimed subscription and its state a row of `CLAIMED_COLUMNS` holds."""
    *subscription, version, blob = row[_SUBSCRIPTION_START:]
    return ClaimedSubscription(
        subscription_from_row(subscription, instant),
        StoredState(int(version), None if blob is None else str(blob)),
    )


def cells_of_rows(
    rows: Iterable[Sequence[Any]], instant: Callable[[Any], datetime]
) -> list[tuple[str, str]]:
    """(cell, id) of each row of `SUBSCRIPTION_COLUMNS`: the cell by `subscription_cell`
    itself, so a back-filled row orders exactly as one `add_subscription` wrote."""
    cells = []
    for row in rows:
        subscription = subscription_from_row(row, instant)
        cells.append((subscription_cell(subscription), str(subscription.id)))
    return cells
