"""Use case: a point's past hours, a page at a time (the extension API's history)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import attrs

from cleanair_core.access.connections import Authorized
from cleanair_core.access.scopes import Scope
from cleanair_core.air.history import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    HistoryHour,
    history_hours,
    history_span,
)
from cleanair_core.air.history_pages import (
    HistoryCursor,
    page_token,
    read_page_token,
    request_digest,
)
from cleanair_core.air.indexes.registry import indexes_for
from cleanair_core.credits.ledger import Billable
from cleanair_core.errors import Unprocessable, Violation
from cleanair_core.geo import Point
from cleanair_core.use_cases.air import check_index_codes
from cleanair_core.use_cases.context import Context, needs_upstream
from cleanair_core.use_cases.credits import PendingHit, charged


@attrs.frozen
class HistoryPage:
    """One page of a history: its hours, oldest first, and the token of the next page
    (None on the last)."""

    hours: list[HistoryHour]
    next_page_token: str | None


async def history(
    ctx: Context,
    proof: Authorized,
    *,
    point: Point,
    start: datetime,
    end: datetime | None = None,
    indexes: Sequence[str] | None = None,
    page_size: int = DEFAULT_PAGE_SIZE,
    page_token: str | None = None,
    client: str | None = None,
    pending: PendingHit | None = None,
) -> HistoryPage:
    """The page of the hours from `start` to `end` (default: now) at `point` that
    `page_token` points at (the first without one), scope `aq:read`.

    The first page is charged for the whole span, 2 credits per started 24 hours
    (`Billable.HISTORY`); its token's later pages are free. Raises Unprocessable (not
    charged) for an unknown index code, a page size outside 1-168, `end` not after `start`,
    or a page token not made for this connection and request (or expired);
    OutsideHistoryWindow (400, not charged) for a span reaching over 30 days back or past
    now; SourceUnavailable (refunded) when no hour has data.
    """
    caller = proof.caller_for(Scope.AQ_READ)
    if indexes is not None:
        check_index_codes(indexes)
    if page_size < 1:
        raise Unprocessable(violations=[Violation("page_size", "minimum", "must be at least 1")])
    if page_size > MAX_PAGE_SIZE:
        raise Unprocessable(
            violations=[Violation("page_size", "maximum", f"must be at most {MAX_PAGE_SIZE}")]
        )
    sources = ctx.require_sources()
    now = ctx.now()
    connection = caller.connection_key
    digest = request_digest(point, start, end, indexes)
    if page_token is None:
        step = max(1, int(sources.air_quality.update_interval))
        cursor = HistoryCursor(history_span(start, end, now, step), 0, now)
    else:
        cursor = read_page_token(ctx.keys.key, page_token, connection, digest, now)
    hours, next_offset = cursor.span.page(cursor.offset, page_size)
    next_token = (
        None
        if next_offset is None
        else page_token_of(ctx, connection, digest, attrs.evolve(cursor, offset=next_offset))
    )

    async def page() -> HistoryPage:
        places = sources.places
        country = None if places is None else await ctx.offload(lambda: places.country_of(point))
        chosen = indexes_for(country, indexes)
        built = await history_hours(
            sources.air_quality, point, hours, chosen, sources.background, ctx.offload
        )
        return HistoryPage(built, next_token)

    if page_token is not None:
        return await page()  # the span was paid for with its first page
    async with charged(
        ctx,
        caller,
        Billable.HISTORY,
        upstream=needs_upstream(sources),
        units=cursor.span.charged_days,
        client=client,
        pending=pending,
    ):
        return await page()


def page_token_of(ctx: Context, connection: str, digest: str, cursor: HistoryCursor) -> str:
    """The token of the page at `cursor`, signed with the server key."""
    return page_token(ctx.keys.key, connection, digest, cursor)
