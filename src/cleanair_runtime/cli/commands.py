"""Runs one parsed command on an open core."""

from __future__ import annotations

import argparse
import sys

from cleanair_core.access.scopes import Scope
from cleanair_core.service import CleanAir
from cleanair_runtime.cli.accounts import (
    list_connections,
    list_partners,
    list_users,
    parse_connection_id,
    print_pool,
    print_usage,
)
from cleanair_runtime.cli.alerts import run_alert_command
from cleanair_runtime.cli.networks import import_network_file, list_networks
from cleanair_runtime.cli.stations import (
    evaluate_stations,
    import_stations,
    list_stations,
    prune_stations,
)
from cleanair_runtime.cli.wifi import import_wifi
from cleanair_runtime.terminal import escape_nonprintable


def run(core: CleanAir, args: argparse.Namespace) -> int:  # noqa: PLR0912, PLR0915 - an arm a command
    """Run one command; its exit status when it can be other than 0."""
    match args.command, getattr(args, "action", None):
        case "users", "add":
            user = core.add_user(args.user, premium=args.premium)
            plan = "premium" if user.premium else "not premium"
            print(f"added user {escape_nonprintable(user.name)} ({plan})")
        case "users", "list":
            list_users(core)
        case "users", "set-premium":
            core.set_premium(args.user, args.state == "on")
            print(f"premium {args.state} for {escape_nonprintable(args.user)}")
        case "pairing-code", _:
            print(escape_nonprintable(core.create_pairing_code(args.user)))
        case "connections", "list":
            list_connections(core.connections_of_user(args.user))
        case "connections", "revoke":
            connection_id = parse_connection_id(args.connection_id)
            core.revoke_connection(connection_id)
            print(f"revoked {connection_id}")
        case "partners", "add":
            core.add_partner(args.partner)
            print(f"added partner {escape_nonprintable(args.partner)}")
        case "partners", "issue-token":
            issued = core.issue_partner_token(
                args.partner, args.name, [Scope(s) for s in args.scope]
            )
            # The token alone on stdout, as scripts capture it; shown this once, never again.
            print(escape_nonprintable(issued.token))
            print(
                f"cleanair: connection {issued.connection.id} (the token is shown only now; "
                f"revoke it with `cleanair partners revoke {escape_nonprintable(args.partner)} "
                f"{issued.connection.id}`)",
                file=sys.stderr,
            )
        case "partners", "deactivate":
            core.deactivate_partner(args.partner)
            print(f"deactivated partner {escape_nonprintable(args.partner)}")
        case "partners", "list":
            list_partners(core)
        case "partners", "connections":
            list_connections(core.connections_of_partner(args.partner))
        case "partners", "revoke":
            connection_id = parse_connection_id(args.connection_id)
            core.revoke_partner_connection(args.partner, connection_id)
            print(f"revoked {connection_id}")
        case "partners", "usage":
            print_usage(core.partner_usage_by_label(args.partner), args.json, args.partner)
        case "clients", "add":
            core.add_client_label(args.label)
            print(f"recognised client label {escape_nonprintable(args.label)}")
        case "credits", "show":
            print_pool(core.pool_report(args.user), args.json)
        case "credits", "grant":
            report = core.grant_credits(args.user, args.credits, args.reason, today=args.today)
            quota = report.quota
            if args.today:
                print(
                    f"granted {args.credits} credits to {escape_nonprintable(args.user)} for "
                    f"today ({report.day} UTC): daily limit {quota.daily_limit}, daily "
                    f"remaining {quota.daily_remaining}; this month's remaining "
                    f"{quota.remaining} still applies"
                )
            else:
                print(
                    f"granted {args.credits} credits to {escape_nonprintable(args.user)} for "
                    f"this month: limit {quota.limit}, remaining {quota.remaining}"
                )
        case "usage", _:
            print_usage(core.usage_by_label(args.user), args.json, args.user)
        case "wifi", "import":
            return import_wifi(core, args.file)
        case "stations", "import":
            return import_stations(core, args.files, args.locations, args.replay)
        case "stations", "evaluate":
            return evaluate_stations(core, args.pollutant, args.since, args.until, args.json)
        case "stations", "list":
            list_stations(core, args.json)
        case "stations", "prune":
            prune_stations(core)
        case "network", "import":
            import_network_file(core, args.file, args.name)
        case "network", "list":
            list_networks(core)
        case "network", "delete":
            core.delete_network(args.name)
            print(f"deleted network {escape_nonprintable(args.name)}")
        case "alerts", _:
            return run_alert_command(core, args)
    return 0
