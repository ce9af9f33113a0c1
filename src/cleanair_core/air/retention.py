"""How long observations are kept, and replaying a past sample as if it were live.

Observations whose hour ended more than the retention ago are pruned by every API process
(at start, then hourly) and by `cleanair stations prune`. An import says so before it writes
(`cleanair stations import`), so rows are never lost to a prune the operator did not expect.

Replaying shifts a sample (the shipped Beijing 2016 stations, say) by whole days so its
latest hour ends at the last full hour, or less than a day before it: whole days keep each
value on its own local hour, so the diurnal cycle (rush-hour NO2, afternoon O3) stays where
it was measured, and the fusion, which uses observations within 72 hours, has fresh ones.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

DAY = timedelta(days=1)


def retention_cutoff(now: datetime, retention_seconds: int) -> datetime | None:
    """The instant an observation's hour must end at or after to be kept at `now`, or None
    when the retention is 0 (kept for ever)."""
    if not retention_seconds:
        return None
    return now - timedelta(seconds=retention_seconds)


def days_to_keep(oldest_hour_end: datetime, now: datetime) -> int:
    """The least whole number of retention days that keeps an observation whose hour ended
    at `oldest_hour_end`, at `now` (for the message telling how to keep old rows)."""
    return max(1, math.ceil((now - oldest_hour_end) / DAY))


def last_full_hour(now: datetime) -> datetime:
    """The end of the latest hour that has ended at `now`."""
    return now.replace(minute=0, second=0, microsecond=0)


def replay_shift(latest_hour_end: datetime, now: datetime) -> timedelta:
    """The whole number of days that moves `latest_hour_end` to the last full hour at `now`
    or less than a day before it (backwards too, for a sample dated ahead)."""
    return ((last_full_hour(now) - latest_hour_end) // DAY) * DAY
