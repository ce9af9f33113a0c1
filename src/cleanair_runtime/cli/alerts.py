"""`cleanair alerts list|show|disable`: operators see every user's alert subscriptions and
disable one (issue 32; docs/alerts.md, "Operators").

A webhook URL is shown by its host alone, as the delivery logs name it: its path and query
may carry the customer's own token for their receiver (`/in?token=...`), which an operator
needs neither to tell whose receiver fails nor to act on it; the owner reads the whole URL
through the API. No webhook secret is stored, so none can be shown.
"""

from __future__ import annotations

import argparse
import json
import uuid
from collections.abc import Iterable
from datetime import datetime, time
from typing import Any, TypeVar

from cleanair_core.alerts.destinations import DestinationPolicy, InvalidWebhookUrl
from cleanair_core.alerts.subscriptions import Forecast, Place, Status, Subscription, Trip
from cleanair_core.errors import OperatorError
from cleanair_core.service import CleanAir
from cleanair_core.use_cases.alert_operators import (
    MAX_OPERATOR_REASON,
    OPERATOR_PREFIX,
    SubscriptionDetails,
)
from cleanair_runtime.terminal import escape_nonprintable

P = TypeVar("P", bound=argparse.ArgumentParser)

#: Reads a stored URL (checked when it was stored, under whatever policy then) for its host:
#: any scheme, port and network, so nothing stored is refused here.
_ANY_DESTINATION = DestinationPolicy(allow_http=True, allowed_ports=None)
_ID_HELP = "the subscription's id (a UUID, from `alerts list`)"


def add_alert_commands(sub: argparse._SubParsersAction[P]) -> None:
    """Declare `alerts list|show|disable` on the CLI's subcommands."""
    alerts = sub.add_parser("alerts", help="see every user's alert subscriptions, disable one")
    actions = alerts.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser(
        "list",
        help="alert subscriptions: id, owner, target, kind, index, threshold, direction, "
        "webhook host, status, created",
    )
    listing.add_argument(
        "--user", help="only this user's, oldest first (default: every user's, by id)"
    )
    listing.add_argument(
        "--status",
        choices=[s.value for s in Status],
        help="only the active or only the disabled ones (default: both)",
    )
    listing.add_argument("--json", action="store_true", help="print a JSON array")
    show = actions.add_parser(
        "show",
        help="one subscription, whoever its owner: its settings, status, reason and state "
        "version; of its webhook, the host only",
    )
    show.add_argument("subscription_id", metavar="ID", help=_ID_HELP)
    show.add_argument("--json", action="store_true", help="print it as one JSON object")
    disable = actions.add_parser(
        "disable",
        help="disable a subscription at once: nothing more is decided or sent for it and its "
        "pending deliveries are given up; its owner reads the reason",
    )
    disable.add_argument("subscription_id", metavar="ID", help=_ID_HELP)
    disable.add_argument(
        "--reason",
        required=True,
        help=f'why, for its owner, who reads "{OPERATOR_PREFIX}" and it (printable, at most '
        f"{MAX_OPERATOR_REASON} characters)",
    )


def run_alert_command(core: CleanAir, args: argparse.Namespace) -> int:
    """Run `alerts ACTION`; its exit status (OperatorError, exit 1, for an unknown id)."""
    match args.action:
        case "list":
            status = None if args.status is None else Status(args.status)
            listed = core.operator_subscriptions(owner=args.user, status=status)
            _print_list(listed, args.json)
        case "show":
            _print_details(
                core.subscription_details(_subscription_id(args.subscription_id)), args.json
            )
        case "disable":
            done = core.disable_by_operator(_subscription_id(args.subscription_id), args.reason)
            s = done.subscription
            reason = s.disabled.reason if s.disabled else ""
            print(
                f"disabled alert subscription {s.id} of {escape_nonprintable(s.owner)}: nothing "
                f"more is decided or sent for it; {done.abandoned} pending deliveries given up; "
                f'its owner reads "{escape_nonprintable(reason)}"'
            )
    return 0


def _subscription_id(raw: str) -> uuid.UUID:
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise OperatorError("an alert subscription id is a UUID") from None


def webhook_host(url: str | None) -> str | None:
    """The host of a stored webhook URL, as the delivery logs name it; None for none."""
    if url is None:
        return None
    try:
        return _ANY_DESTINATION.validate_url(url).host
    except InvalidWebhookUrl:  # not stored by this release's checks: nothing of it is shown
        return "(unreadable)"


def _print_list(listed: Iterable[Subscription], as_json: bool) -> None:
    if as_json:
        # One object at a time: a listing of every user's holds one page in memory.
        print("[", end="")
        for position, subscription in enumerate(listed):
            print(", " if position else "", json.dumps(_as_json(subscription)), sep="", end="")
        print("]")
        return
    print("id\towner\ttarget\tkind\tindex\tthreshold\tdirection\twebhook\tstatus\tcreated")
    for s in listed:
        target = "place" if isinstance(s.target, Place) else "trip"
        kind = "forecast" if isinstance(s.kind, Forecast) else "observed"
        cells = [
            str(s.id),
            escape_nonprintable(s.owner),
            target,
            kind,
            escape_nonprintable(s.index or "-"),
            str(s.threshold),
            s.direction.value,
            escape_nonprintable(webhook_host(s.webhook_url) or "-"),
            s.status.value,
            _when(s.created_at),
        ]
        print("\t".join(cells))


def _print_details(details: SubscriptionDetails, as_json: bool) -> None:
    s = details.subscription
    if as_json:
        print(json.dumps({**_as_json(s), "state_version": details.state_version}))
        return
    disabled = s.disabled
    quiet = s.quiet_hours
    rows = [
        ("id", str(s.id)),
        ("owner", s.owner),
        ("connection", s.connection_id),
        ("created", _when(s.created_at)),
        ("status", s.status.value),
        ("disabled at", _when(None if disabled is None else disabled.at)),
        ("reason", "-" if disabled is None else disabled.reason),
        ("target", _target_text(s)),
        ("index", s.index or "the place's own"),
        ("threshold", str(s.threshold)),
        ("direction", s.direction.value),
        ("audience", s.audience.value),
        ("kind", _kind_text(s)),
        ("timezone", s.timezone),
        ("quiet hours", "-" if quiet is None else f"{_wall(quiet.start)} to {_wall(quiet.end)}"),
        ("webhook host", webhook_host(s.webhook_url) or "- (feed only)"),
        ("secret generation", str(s.secret_generation)),
        ("previous secret until", _when(s.previous_generation_until)),
        ("state version", str(details.state_version)),
    ]
    for name, value in rows:
        print(f"{name}\t{escape_nonprintable(value)}")


def _target_text(s: Subscription) -> str:
    target = s.target
    if isinstance(target, Place):
        return f"place {target.point.lat:.5f} {target.point.lon:.5f}"
    days = ",".join(str(day) for day in sorted(target.days))
    return (
        f"trip {target.start.lat:.5f} {target.start.lon:.5f} to {target.end.lat:.5f} "
        f"{target.end.lon:.5f} {target.activity.value}, leaving at {_wall(target.departure)} "
        f"on days {days}"
    )


def _kind_text(s: Subscription) -> str:
    kind = s.kind
    if isinstance(kind, Forecast):
        return f"forecast of {kind.target_day.value}, sent at {_wall(kind.send_at)}"
    return (
        f"observed, all-clear after {kind.hysteresis_hours} hours at least "
        f"{kind.hysteresis_categories} categories back"
    )


def _as_json(s: Subscription) -> dict[str, Any]:
    """The subscription as the API shows it to its owner (`AlertSubscription`), with its
    owner, connection and secret generation, and the webhook's host in place of its URL."""
    target: dict[str, Any]
    if isinstance(s.target, Trip):
        trip = s.target
        target = {
            "type": "trip",
            "start": {"lat": trip.start.lat, "lon": trip.start.lon},
            "end": {"lat": trip.end.lat, "lon": trip.end.lon},
            "activity_type": trip.activity.value,
            "departure": _wall(trip.departure),
            "days": sorted(trip.days),
        }
    else:
        target = {"type": "place", "lat": s.target.point.lat, "lon": s.target.point.lon}
    kind: dict[str, Any]
    if isinstance(s.kind, Forecast):
        kind = {"type": "forecast", "target_day": s.kind.target_day.value}
        kind["send_at"] = _wall(s.kind.send_at)
    else:
        kind = {"type": "observed", "hysteresis_categories": s.kind.hysteresis_categories}
        kind["hysteresis_hours"] = s.kind.hysteresis_hours
    quiet = s.quiet_hours
    disabled = s.disabled
    return {
        "id": str(s.id),
        "owner": s.owner,
        "connection_id": s.connection_id,
        "created_at": _iso(s.created_at),
        "target": target,
        "index": s.index,
        "threshold": s.threshold,
        "direction": s.direction.value,
        "audience": s.audience.value,
        "kind": kind,
        "timezone": s.timezone,
        "quiet_hours": (
            None if quiet is None else {"start": _wall(quiet.start), "end": _wall(quiet.end)}
        ),
        "webhook_host": webhook_host(s.webhook_url),
        "secret_generation": s.secret_generation,
        "previous_secret_valid_until": _iso(s.previous_generation_until),
        "status": s.status.value,
        "disabled_reason": None if disabled is None else disabled.reason,
        "disabled_at": None if disabled is None else _iso(disabled.at),
    }


def _wall(value: time) -> str:
    """`HH:MM` as the API takes local times; seconds too when a time has them."""
    return value.isoformat(timespec="minutes" if not value.second else "seconds")


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat(timespec="seconds")


def _when(value: datetime | None) -> str:
    return "-" if value is None else value.isoformat(timespec="seconds")
