"""The alert feed: a user's alert events in order, for clients without a public URL to
receive webhooks (`GET /ext/v1/alerts/events`, issue 32).

The feed is the user's, as subscriptions are: every connection of the user reads the events
of every subscription the user holds, whichever connection made it. A client keeps the
cursor of the last event it read and asks for the events after it; cursors are gap-free and
become visible in order (`AlertOutbox.record_alert_events`), so a client that polls misses
nothing and reads nothing twice.
"""

from __future__ import annotations

import time
from datetime import timedelta

import attrs

from cleanair_core.access.connections import Authorized
from cleanair_core.access.scopes import Scope
from cleanair_core.alerts.outbox import FeedEntry
from cleanair_core.errors import Unprocessable, Violation
from cleanair_core.use_cases.context import Context

#: Rows one prune deletes in one transaction (feed entries, and as many deliveries): on
#: SQLite every charged call waits while it runs.
PRUNE_BATCH = 1_000
#: The pause after each batch, as `alert_rounds.WRITE_PAUSE` (which says why).
PRUNE_PAUSE = 0.002
#: The most events one page holds, and how many a page holds when not asked.
MAX_FEED_PAGE = 100
DEFAULT_FEED_PAGE = 50


@attrs.frozen
class FeedPage:
    """A page of the feed: `events` after the cursor asked for, in order; `next_after` the
    cursor to ask for next (the last event's, or the one asked for when there was none);
    `more` whether events after the page were already there."""

    events: tuple[FeedEntry, ...]
    next_after: int
    more: bool


def read_alert_feed(
    ctx: Context, proof: Authorized, after: int = 0, limit: int = DEFAULT_FEED_PAGE
) -> FeedPage:
    """The caller's user's events after the cursor `after` (0 for the first), at most
    `limit` (1 to `MAX_FEED_PAGE`). Free; not premium-gated, so a lapsed user still reads
    what was sent; the connection must be user-owned. Unprocessable for a bound broken."""
    caller = proof.caller_for(Scope.AQ_READ, premium=False, user_owned=True)
    violations = []
    if after < 0:
        violations.append(Violation("after", "minimum", "must be at least 0"))
    if not 1 <= limit <= MAX_FEED_PAGE:
        rule, words = (
            ("minimum", "must be at least 1")
            if limit < 1
            else ("maximum", f"must be at most {MAX_FEED_PAGE}")
        )
        violations.append(Violation("limit", rule, words))
    if violations:
        raise Unprocessable(violations=violations)
    # One more than asked tells whether the page is the last, in the same read.
    rows = ctx.store.alert_feed(caller.owner.name, after, limit + 1)
    events = tuple(rows[:limit])
    return FeedPage(
        events=events,
        next_after=events[-1].cursor if events else after,
        more=len(rows) > limit,
    )


def prune_alert_history(ctx: Context) -> int:
    """Delete the feed entries and the deliveries no longer owed that are older than the
    alert retention (`Policy.alert_retention_seconds`), oldest first, a batch a transaction;
    how many rows went. A client whose cursor is older reads on from the oldest kept."""
    before = ctx.now() - timedelta(seconds=ctx.policy.alert_retention_seconds)
    pruned = 0
    while True:
        count = ctx.store.prune_alert_events(before, PRUNE_BATCH)
        pruned += count
        if count < PRUNE_BATCH:  # neither kind filled its batch: nothing older is left
            return pruned
        time.sleep(PRUNE_PAUSE)  # on a worker's thread, never the event loop's
