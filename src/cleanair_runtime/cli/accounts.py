"""`cleanair users`, `connections`, `partners`, `usage` and `credits`: the accounts' tables."""

from __future__ import annotations

import json
import uuid

import attrs

from cleanair_core.access.connections import Connection
from cleanair_core.access.scopes import format_scopes
from cleanair_core.errors import OperatorError
from cleanair_core.service import CleanAir
from cleanair_core.use_cases.credits import PoolReport
from cleanair_runtime.cli.formatting import when
from cleanair_runtime.terminal import escape_nonprintable


def list_connections(listed: list[Connection]) -> None:
    """The connections as a table: id, name, scopes, created, revoked."""
    print("id\tname\tscopes\tcreated\trevoked")
    for c in listed:
        scopes = ",".join(format_scopes(c.scopes))
        # Any text an API client chose, tabs and newlines included: escaped, so it can
        # neither draw over the terminal nor break the table's rows and columns.
        name = escape_nonprintable(c.name)
        print(f"{c.id}\t{name}\t{scopes}\t{when(c.created_at)}\t{when(c.revoked_at)}")


def list_users(core: CleanAir) -> None:
    """The users as a table: name, premium, created."""
    print("name\tpremium\tcreated")
    for user in core.users():
        premium = "on" if user.premium else "off"  # as `users set-premium` takes it
        print(f"{escape_nonprintable(user.name)}\t{premium}\t{when(user.created_at)}")


def list_partners(core: CleanAir) -> None:
    """The partners as a table: name, active, created."""
    print("name\tactive\tcreated")
    for partner in core.partners():
        active = "yes" if partner.active else "no"
        print(f"{escape_nonprintable(partner.name)}\t{active}\t{when(partner.created_at)}")


def print_usage(usage: dict[str, int], as_json: bool, owner: str) -> None:
    """`owner`'s calls by client label, as a table or JSON."""
    if as_json:
        # ensure_ascii escapes everything outside printable ASCII, DEL included.
        print(json.dumps(usage, sort_keys=True))
    elif not usage:  # an empty answer would look like a command that did nothing
        print(f"no credits used this month by {escape_nonprintable(owner)}")
    else:
        for label, credits in sorted(usage.items()):
            print(f"{escape_nonprintable(label)}\t{credits}")


def print_pool(report: PoolReport, as_json: bool) -> None:
    """A user's credit pool: its month, today and the grants, as text or JSON."""
    quota = report.quota
    if as_json:
        print(
            json.dumps(
                {
                    "quota": attrs.asdict(quota),
                    "grants": [
                        {
                            "credits": g.amount,
                            "at": when(g.at),
                            "reason": g.reason,
                            # The window it raised: a month's pool or (a day grant) a day's cap.
                            "for": g.day if g.is_day_grant else g.month,
                        }
                        for g in report.grants
                    ],
                    "usage": report.by_label,
                },
                sort_keys=True,
            )
        )
        return
    granted = sum(g.amount for g in report.grants if not g.is_day_grant)
    today = sum(g.amount for g in report.grants if g.is_day_grant and g.day == report.day)
    print(f"month\tused {quota.used}\tlimit {quota.limit}\tremaining {quota.remaining}")
    print(
        f"day\tused {quota.daily_used}\tlimit {quota.daily_limit}"
        f"\tremaining {quota.daily_remaining}"
    )
    print(f"granted this month\t{granted}")
    print(f"granted today\t{today}")
    for g in report.grants:
        kind = "day grant" if g.is_day_grant else "grant"
        print(f"{kind}\t{g.amount}\t{when(g.at)}\t{escape_nonprintable(g.reason or '')}")
    for label, used in sorted(report.by_label.items()):
        print(f"usage\t{escape_nonprintable(label)}\t{used}")


def parse_connection_id(raw: str) -> uuid.UUID:
    """A connection id as typed; OperatorError when it is not one."""
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise OperatorError("a connection id is a UUID") from None
