"""`CleanAir`: the core's use cases behind one object, for the HTTP app and embedders alike.

A thin facade: each method delegates to its area's use-case module in `cleanair_core.use_cases`
(access, credits, air, routes), where the sequence of rules lives.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import date, datetime, timedelta
from enum import StrEnum
from typing import TypeVar

from cleanair_core.access.accounts import Partner, User
from cleanair_core.access.connections import Authorized, Caller, Connection, IssuedConnection
from cleanair_core.access.scopes import Scope
from cleanair_core.air.activities import ActivityType
from cleanair_core.air.conditions import Conditions
from cleanair_core.air.exposure import EnvironmentType
from cleanair_core.air.forecast import Forecast
from cleanair_core.air.fusion_evaluation import PollutantEvaluation
from cleanair_core.air.observations import (
    OBSERVED,
    Observation,
    ObservationsWritten,
    Station,
    StationSummary,
)
from cleanair_core.air.point_score import PointScore
from cleanair_core.air.pollutants import Pollutant
from cleanair_core.air.screening import ObservationImport
from cleanair_core.air.tiles.geometry import Tile
from cleanair_core.air.wifi import WifiAccessPoint
from cleanair_core.air.wifi_location import IMPORT_BATCH_SIZE, PROGRESS_EVERY_ROWS, ImportReport
from cleanair_core.alerts.delivery import WebhookSender
from cleanair_core.alerts.dispatch import DeliveryCounts, DeliverySettings, deliver_due
from cleanair_core.alerts.subscriptions import Status, Subscription
from cleanair_core.clock import Clock, SystemClock
from cleanair_core.credits.charging import Charge, HeldCharges
from cleanair_core.credits.ledger import Billable, Quota
from cleanair_core.credits.rate_limits import RateLimit
from cleanair_core.errors import Unprocessable
from cleanair_core.geo import Point
from cleanair_core.keys import TokenKeys
from cleanair_core.metrics import NO_METRICS, Metrics
from cleanair_core.offload import Offload, inline
from cleanair_core.policy import Policy
from cleanair_core.ports import Sources, Store
from cleanair_core.request_calls import RequestStore, offloaded
from cleanair_core.routes.enrichment import EnrichedRoute, Waypoint
from cleanair_core.routes.network import NetworkSummary, PlanActivityType, StreetNetwork
from cleanair_core.routes.plans import DEFAULT_STEP, Plan, PlanKind
from cleanair_core.use_cases import (
    access,
    admission,
    air,
    alert_feed,
    alert_operators,
    alert_rounds,
    alerts,
    credits,
    health,
    routes,
)
from cleanair_core.use_cases.admission import Admitted
from cleanair_core.use_cases.alert_feed import FeedPage
from cleanair_core.use_cases.alert_operators import DisabledSubscription, SubscriptionDetails
from cleanair_core.use_cases.alert_rounds import RoundReport
from cleanair_core.use_cases.alerts import CreatedSubscription, NewSubscription, RotatedSecret
from cleanair_core.use_cases.context import Context
from cleanair_core.use_cases.credits import PendingHit, PoolReport
from cleanair_core.use_cases.health import Readiness
from cleanair_core.use_cases.history import HistoryPage
from cleanair_core.use_cases.history import history as history_page
from cleanair_core.use_cases.tiles import TileAnswer, heatmap_tile

E = TypeVar("E", bound=StrEnum)


def contract_value(kind: type[E], value: E | str) -> E:
    """`value` as a member of `kind`: the member itself, or the contract's string for it.

    The enums are `StrEnum`s, so a plain string passed where one is expected looks right
    (it compares and hashes equal) until a rule reads a member's property; converting at the
    facade gives an embedder the contract's vocabulary and an early, uncharged error.
    """
    if isinstance(value, kind):
        return value
    try:
        return kind(value)
    except ValueError:
        raise Unprocessable() from None


class CleanAir:
    """Use cases of the service over a `Store`, a clock and the server's token keys.

    The computing use cases (score, forecast, route enrichment, plans) take an `Authorized`
    proof from `authorize`, never a bare `Caller`: scope and premium are checked once.
    """

    def __init__(
        self,
        store: Store,
        keys: TokenKeys,
        policy: Policy | None = None,
        clock: Clock | None = None,
        randbelow: Callable[[int], int] = secrets.randbelow,
        sources: Sources | None = None,
        offload: Offload = inline,
        store_calls: Offload | None = None,
        metrics: Metrics = NO_METRICS,
        requests: RequestStore | None = None,
    ) -> None:
        """`offload` runs the async use cases' blocking work (storage waits, path searches):
        give a service with an event loop a thread (`anyio.to_thread.run_sync`).
        `store_calls` runs their one-step store calls (a charge's debit and settlement;
        default: `offload`): `here_unless_blocked(offload)` spares the thread while nothing
        holds the store. `metrics` hears of credits charged and refunded and of plans
        finished. `requests` makes the request path's store calls (admission, rate-limit hits,
        final charges) from the event loop; default: the store's sync ports on
        `store_calls`."""
        store_calls = offload if store_calls is None else store_calls
        self.context = Context(
            store=store,
            keys=keys,
            policy=policy or Policy(),
            clock=clock or SystemClock(),
            sources=sources,
            randbelow=randbelow,
            offload=offload,
            store_calls=store_calls,
            metrics=metrics,
            requests=offloaded(store, store_calls) if requests is None else requests,
        )

    @property
    def store(self) -> Store:
        return self.context.store

    @property
    def sources(self) -> Sources | None:
        return self.context.sources

    @property
    def keys(self) -> TokenKeys:
        return self.context.keys

    @property
    def policy(self) -> Policy:
        return self.context.policy

    @property
    def clock(self) -> Clock:
        return self.context.clock

    @property
    def metrics(self) -> Metrics:
        return self.context.metrics

    @property
    def store_calls(self) -> Offload:
        """Where one-step store calls run: the event loop's caller awaits it for every store
        call it makes itself (a request's authentication, a quota read)."""
        return self.context.store_calls

    @property
    def held_charges(self) -> HeldCharges:
        """The charges this object has reserved and not yet settled."""
        return self.context.held_charges

    # -- operator use cases (the CLI stands in for the companion app and partner agreements) --

    def add_user(self, name: str, *, premium: bool = True) -> User:
        return access.add_user(self.context, name, premium=premium)

    def set_premium(self, name: str, premium: bool) -> None:
        access.set_premium(self.context, name, premium)

    def create_pairing_code(self, user_name: str) -> str:
        """A fresh code for a premium user, as the companion app would show it."""
        return access.create_pairing_code(self.context, user_name)

    def add_partner(self, name: str) -> Partner:
        return access.add_partner(self.context, name)

    def deactivate_partner(self, name: str) -> None:
        access.deactivate_partner(self.context, name)

    def issue_partner_token(
        self, partner_name: str, connection_name: str, scopes: Iterable[Scope]
    ) -> IssuedConnection:
        return access.issue_partner_token(self.context, partner_name, connection_name, scopes)

    def connections_of_user(self, name: str) -> list[Connection]:
        return access.connections_of_user(self.context, name)

    def revoke_connection(self, connection_id: uuid.UUID) -> None:
        access.revoke_connection(self.context, connection_id)

    def users(self) -> list[User]:
        """Every user, by name."""
        return access.list_users(self.context)

    def partners(self) -> list[Partner]:
        """Every partner, active or not, by name."""
        return access.list_partners(self.context)

    def connections_of_partner(self, name: str) -> list[Connection]:
        """Every connection of a partner, oldest first, revoked ones included."""
        return access.connections_of_partner(self.context, name)

    def revoke_partner_connection(self, name: str, connection_id: uuid.UUID) -> None:
        """Revoke a connection of partner `name`; OperatorError for any other's."""
        access.revoke_partner_connection(self.context, name, connection_id)

    def add_client_label(self, label: str) -> None:
        credits.add_client_label(self.context, label)

    def usage_by_label(self, user_name: str) -> dict[str, int]:
        """This month's net credits per attribution label for a user."""
        return credits.usage_by_label(self.context, user_name)

    def pool_report(self, user_name: str) -> PoolReport:
        """A user's quota this month, its grants and its usage per label (support)."""
        return credits.pool_report(self.context, user_name)

    def grant_credits(
        self, user_name: str, amount: int, reason: str, *, today: bool = False
    ) -> PoolReport:
        """Add `amount` credits to a user's pool for this month only, with `reason` in the
        ledger; the daily burst cap still applies (`cleanair_core.credits.ledger`). With
        `today`, raise this UTC day's burst cap by `amount` instead, within the month's pool."""
        return credits.grant_credits(self.context, user_name, amount, reason, today=today)

    def partner_usage_by_label(self, partner_name: str) -> dict[str, int]:
        """This month's net credits per attribution label for a partner's credit pool."""
        return credits.partner_usage_by_label(self.context, partner_name)

    def import_access_points(
        self,
        lines: Iterable[str],
        *,
        report: ImportReport | None = None,
        batch_size: int = IMPORT_BATCH_SIZE,
        on_progress: Callable[[ImportReport], None] | None = None,
        progress_every: int = PROGRESS_EVERY_ROWS,
    ) -> ImportReport:
        """Import the operator's access points from CSV text (only keyed hashes are stored)."""
        return air.import_access_points(
            self.context,
            lines,
            report=report,
            batch_size=batch_size,
            on_progress=on_progress,
            progress_every=progress_every,
        )

    def import_observations(
        self,
        parsed: Iterable[Station | Observation],
        *,
        chunk_size: int = air.OBSERVATION_CHUNK,
        on_chunk: Callable[[int, ObservationsWritten], None] | None = None,
    ) -> ObservationImport:
        """Store stations and their observations, all or nothing: the stations given, what
        writing the observations did and the observations the intake screening held back
        (`use_cases.air.import_observations`)."""
        return air.import_observations(
            self.context, parsed, chunk_size=chunk_size, on_chunk=on_chunk
        )

    def station_summaries(self) -> list[StationSummary]:
        """Every stored station, by id, with its count of observations and their span."""
        return air.station_summaries(self.context)

    async def evaluate_stations(
        self,
        *,
        pollutants: Sequence[Pollutant] = OBSERVED,
        since: datetime | None = None,
        until: datetime | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> list[PollutantEvaluation]:
        """The service's own error against the stored observations, leaving one station out
        at a time (`use_cases.air.evaluate_stations`); `progress` hears what is being fitted."""
        return await air.evaluate_stations(
            self.context, pollutants=pollutants, since=since, until=until, progress=progress
        )

    def prune_observations(self) -> int:
        """Delete observations older than the retention period; how many were deleted."""
        return air.prune_observations(self.context)

    def save_network(self, network: StreetNetwork) -> None:
        routes.save_network(self.context, network)

    def network_summaries(self) -> list[NetworkSummary]:
        return routes.network_summaries(self.context)

    def delete_network(self, name: str) -> None:
        """Raises OperatorError when there is no network `name`."""
        routes.delete_network(self.context, name)

    # -- API use cases -----------------------------------------------------------------------

    def redeem_pairing_code(self, code: str, name: str, client_address: str) -> IssuedConnection:
        """Exchange a pairing code for a user connection with the pairing scopes.

        Raises RateLimited when the address's attempts or the global guess budget are spent,
        and InvalidPairingCode (one error for every cause) when the code cannot be redeemed.
        """
        return access.redeem_pairing_code(self.context, code, name, client_address)

    def count_explore_request(self, client_address: str) -> None:
        """Count a request for the explorer's public network index or tiles from
        `client_address` (one store write); raises RateLimited over the policy's
        `explore_requests_per_minute`."""
        access.count_explore_request(self.context, client_address)

    def authenticate(self, token: str) -> Caller:
        """The caller behind a raw bearer token; raises NotAuthenticated."""
        return access.authenticate_token(self.context, token)

    def admit(
        self,
        token: str,
        *,
        rule: RateLimit | None = None,
        scope: Scope | None = None,
        premium: bool = True,
        user_owned: bool = False,
        defer_hit: bool = False,
    ) -> Admitted:
        """Authenticate a raw bearer token, apply the rate limit `rule` (default: the general
        one) and authorize `scope` when given, on one read of the store; with `defer_hit`,
        the hit is left pending for the call's final charge. See
        `cleanair_core.use_cases.admission.admit`."""
        return admission.admit(
            self.context,
            token,
            rule=rule,
            scope=scope,
            premium=premium,
            user_owned=user_owned,
            defer_hit=defer_hit,
        )

    async def admit_awaited(
        self,
        token: str,
        *,
        rule: RateLimit | None = None,
        scope: Scope | None = None,
        premium: bool = True,
        user_owned: bool = False,
        defer_hit: bool = False,
    ) -> Admitted:
        """`admit` from the event loop: its store calls awaited on the request path's
        (`CleanAir(requests=...)`), never run in a thread by PostgreSQL's."""
        return await admission.admit_awaited(
            self.context,
            token,
            rule=rule,
            scope=scope,
            premium=premium,
            user_owned=user_owned,
            defer_hit=defer_hit,
        )

    async def count_pending_hit_awaited(self, pending: PendingHit) -> bool:
        """`count_pending_hit` from the event loop, on the request path's store calls."""
        return await credits.count_pending_hit_awaited(self.context, pending)

    def count_pending_hit(self, pending: PendingHit) -> bool:
        """Count a request's pending rate-limit hit that its call did not (it failed before
        its charge); a no-op once counted. Whether it went over the limit."""
        return credits.count_pending_hit(self.context, pending)

    def authorize(
        self, caller: Caller, scope: Scope, *, premium: bool = True, user_owned: bool = False
    ) -> Authorized:
        """Check `scope`, the owner's premium plan (unless `premium=False`) and, when asked, a
        user-owned connection; the proof the computing use cases take. Raises MissingScope,
        NotPremium or PartnerConnectionRefused."""
        return access.authorize(self.context, caller, scope, premium=premium, user_owned=user_owned)

    def enforce_rate_limit(self, caller: Caller, rule: RateLimit | None = None) -> None:
        """Count a request of `caller` against `rule` (default: the general request limit)."""
        credits.enforce_rate_limit(self.context, caller, rule)

    def quota(self, caller: Caller) -> Quota:
        return credits.quota(self.context, caller)

    def charge(
        self, caller: Caller, billable: Billable, units: int = 1, client: str | None = None
    ) -> Charge:
        """A held reservation of the call's cost, to use as a (sync or async) context
        manager: final when the block ends without error, refunded when it raises, and
        refunded by `sweep_charge_holds` if the process dies in between."""
        return credits.charge(self.context, caller, billable, units, client)

    def renew_charge_holds(self) -> int:
        """Keep the holds of this object's calls in progress from ending (call it every
        `hold_renewal_every(policy.charge_hold)` seconds); the number renewed."""
        return credits.renew_charge_holds(self.context)

    def sweep_charge_holds(self) -> int:
        """Refund the charges whose holds ended unconfirmed: their process died before it
        answered. A route plan paid by one fails. Any process sharing the store may sweep."""
        return credits.sweep_charge_holds(self.context)

    async def score(
        self,
        proof: Authorized,
        *,
        point: Point | None = None,
        wifi: Sequence[WifiAccessPoint] = (),
        client: str | None = None,
        pending: PendingHit | None = None,
    ) -> PointScore:
        """The Clean Air Score at a point or a Wi-Fi scan's place (1 credit; proof for
        `Scope.AQ_READ`; `pending` as `admit` left it). See
        `cleanair_core.use_cases.air.score`."""
        return await air.score(
            self.context, proof, point=point, wifi=wifi, client=client, pending=pending
        )

    async def conditions(
        self,
        proof: Authorized,
        *,
        point: Point | None = None,
        wifi: Sequence[WifiAccessPoint] = (),
        client: str | None = None,
        indexes: Sequence[str] | None = None,
        pending: PendingHit | None = None,
    ) -> Conditions:
        """A point's conditions now: score, concentrations, official indexes, provenance
        (`use_cases.air.conditions`; 1 credit)."""
        return await air.conditions(
            self.context,
            proof,
            point=point,
            wifi=wifi,
            client=client,
            indexes=indexes,
            pending=pending,
        )

    async def history(
        self,
        proof: Authorized,
        *,
        point: Point,
        start: datetime,
        end: datetime | None = None,
        indexes: Sequence[str] | None = None,
        page_size: int = 24,
        page_token: str | None = None,
        client: str | None = None,
        pending: PendingHit | None = None,
    ) -> HistoryPage:
        """A page of a point's past hours (2 credits per started day of the span, on its
        first page; proof for `Scope.AQ_READ`). See `cleanair_core.use_cases.history`."""
        return await history_page(
            self.context,
            proof,
            point=point,
            start=start,
            end=end,
            indexes=indexes,
            page_size=page_size,
            page_token=page_token,
            client=client,
            pending=pending,
        )

    async def heatmap_tile(
        self,
        proof: Authorized,
        *,
        layer: str,
        tile: Tile,
        at: datetime | None = None,
        palette: str = "default",
        if_none_match: str | None = None,
    ) -> TileAnswer:
        """A heatmap tile's PNG, or a 304 answer for a current copy (`use_cases.tiles`;
        free of credits, counted against the owner's daily tile allowance)."""
        return await heatmap_tile(
            self.context,
            proof,
            layer=layer,
            tile=tile,
            at=at,
            palette=palette,
            if_none_match=if_none_match,
        )

    async def forecast(
        self,
        proof: Authorized,
        *,
        day: date,
        timezone: str,
        point: Point | None = None,
        activity: ActivityType | str = ActivityType.OTHER,
        environment: EnvironmentType | str = EnvironmentType.OUTDOOR,
        client_address: str | None = None,
        pending: PendingHit | None = None,
    ) -> Forecast:
        """Hourly scores and concentrations for a local day (2 credits; proof for
        `Scope.AQ_READ`). `activity` and `environment` are the enums or the contract's strings
        (`"cycling"`; Unprocessable for any other, before any charge). See
        `cleanair_core.use_cases.air.forecast`."""
        return await air.forecast(
            self.context,
            proof,
            day=day,
            timezone=timezone,
            point=point,
            activity=contract_value(ActivityType, activity),
            environment=contract_value(EnvironmentType, environment),
            client_address=client_address,
            pending=pending,
        )

    async def enrich_route(
        self,
        proof: Authorized,
        *,
        waypoints: Sequence[Waypoint],
        start_time: datetime | None = None,
        activity: ActivityType | str = ActivityType.OTHER,
        environment: EnvironmentType | str = EnvironmentType.OUTDOOR,
        pending: PendingHit | None = None,
    ) -> EnrichedRoute:
        """The air at every waypoint and the route's summary (1 credit each; proof for
        `Scope.AQ_ROUTES`). `activity` and `environment` as for `forecast`. See
        `cleanair_core.use_cases.routes.enrich_route`."""
        return await routes.enrich_route(
            self.context,
            proof,
            waypoints=waypoints,
            start_time=start_time,
            activity=contract_value(ActivityType, activity),
            environment=contract_value(EnvironmentType, environment),
            pending=pending,
        )

    def submit_plan(
        self,
        proof: Authorized,
        *,
        start: Point,
        end: Point,
        activity: PlanActivityType | str,
        start_time: datetime | None = None,
    ) -> uuid.UUID:
        """Store a route plan as pending and charge 25 credits (proof for `Scope.ROUTES_PLAN`,
        user-owned); its request id. `activity` is a `PlanActivityType` or the contract's
        string (`"walking"`, `"cycling"`, `"running"`; Unprocessable for any other, not
        charged). See `cleanair_core.use_cases.routes.submit_plan`."""
        return routes.submit_plan(
            self.context,
            proof,
            start=start,
            end=end,
            activity=contract_value(PlanActivityType, activity),
            start_time=start_time,
        )

    def poll_plan(self, proof: Authorized, plan_id: uuid.UUID) -> Plan:
        """The caller's route plan `plan_id` (free; proof for `Scope.ROUTES_PLAN`,
        premium=False); NotFound for an unknown plan, another user's or a departures plan."""
        return routes.poll_plan(self.context, proof, plan_id)

    def submit_departures(
        self,
        proof: Authorized,
        *,
        start: Point,
        end: Point,
        activity: PlanActivityType | str,
        earliest: datetime,
        latest: datetime,
        step: timedelta = DEFAULT_STEP,
    ) -> uuid.UUID:
        """Store a departures plan (the best time to go) as pending and charge 25 credits,
        with the proof a route plan takes; its request id. See
        `cleanair_core.use_cases.routes.submit_departures`."""
        return routes.submit_departures(
            self.context,
            proof,
            start=start,
            end=end,
            activity=contract_value(PlanActivityType, activity),
            earliest=earliest,
            latest=latest,
            step=step,
        )

    def poll_departures(self, proof: Authorized, plan_id: uuid.UUID) -> Plan:
        """The caller's departures plan `plan_id`, as `poll_plan` (its result, once
        completed, is a `DeparturesResult`); NotFound for a route plan."""
        return routes.poll_plan(self.context, proof, plan_id, PlanKind.DEPARTURES)

    async def evaluate_alerts(self, claimant: str) -> RoundReport:
        """Claim a batch of the alert subscriptions due now for the worker `claimant`,
        evaluate them and store the outcomes: see
        `cleanair_core.use_cases.alert_rounds.evaluate_due`."""
        return await alert_rounds.evaluate_due(self.context, claimant)

    async def deliver_alerts(
        self, sender: WebhookSender, settings: DeliverySettings
    ) -> DeliveryCounts:
        """One pass of the webhook delivery loop (`cleanair_core.alerts.dispatch.deliver_due`)
        on this deployment's store, keys, clock and offload; the outcomes go to its metrics."""
        ctx = self.context
        counts = await deliver_due(ctx.store, sender, ctx.keys, ctx.clock, ctx.offload, settings)
        for outcome in ("delivered", "retried", "failed", "disabled"):
            if getattr(counts, outcome):
                ctx.metrics.alert_deliveries(outcome, getattr(counts, outcome))
        for lag in counts.lags:
            ctx.metrics.alert_delivery_lag(lag)
        return counts

    def read_alert_feed(self, proof: Authorized, after: int, limit: int) -> FeedPage:
        """The caller's user's alert events after the cursor `after`: see
        `cleanair_core.use_cases.alert_feed.read_alert_feed`."""
        return alert_feed.read_alert_feed(self.context, proof, after, limit)

    def claim_next_plan(self) -> Plan | None:
        """Take the oldest pending plan no live worker holds (None when there is none)."""
        return routes.claim_next_plan(self.context)

    async def run_plan(self, plan: Plan) -> Plan | None:
        """Plan a claimed plan and store its outcome (every failure refunded); the plan as
        finished, or None when its claim had gone stale and nothing was stored."""
        return await routes.run_plan(self.context, plan)

    async def work_on_next_plan(self) -> Plan | None:
        """Claim and run one plan; the plan as it ended (completed or failed, with its result
        or error), or None when there was none. See
        `cleanair_core.use_cases.routes.work_on_next_plan`."""
        return await routes.work_on_next_plan(self.context)

    def renew_plan_lease(self, plan: Plan) -> bool:
        """Keep holding a claimed plan being worked on (call well within the lease); False
        once it is finished or, its lease having run out, another worker took it."""
        return routes.renew_plan_lease(self.context, plan)

    def release_plan(self, plan: Plan) -> bool:
        """Hand back a claimed plan this worker will not finish: the next worker takes it
        at once, and the attempt does not count."""
        return routes.release_plan(self.context, plan)

    def prune_plans(self) -> int:
        """Delete plans finished longer ago than the retention period."""
        return routes.prune_plans(self.context)

    def prune_alert_history(self) -> int:
        """Delete alert feed entries and finished webhook deliveries past the alert
        retention: see `cleanair_core.use_cases.alert_feed.prune_alert_history`."""
        return alert_feed.prune_alert_history(self.context)

    def seconds_until_air_preparation(self) -> float:
        """Seconds until `prepare_network_air` should run: shortly before the source's next
        hour (0 when that time has come)."""
        return routes.seconds_until_air_preparation(self.context)

    async def prepare_network_air(self) -> int:
        """Compute the next hours' air at every node of every loaded network, so the first
        plans of the hour wait on none; how many network-hours. See
        `cleanair_core.use_cases.routes.prepare_network_air`."""
        return await routes.prepare_network_air(self.context)

    # -- alert subscriptions (free; the events are what costs) -------------------------------

    def create_subscription(self, proof: Authorized, new: NewSubscription) -> CreatedSubscription:
        """Store an alert subscription for the caller's user, with its webhook secret when it
        has a webhook (proof for `Scope.AQ_READ`, user-owned; a trip needs `routes:plan`
        too). See `cleanair_core.use_cases.alerts.create_subscription`."""
        return alerts.create_subscription(self.context, proof, new)

    def list_subscriptions(self, proof: Authorized) -> list[Subscription]:
        """The caller's user's alert subscriptions, oldest first (proof for `Scope.AQ_READ`,
        user-owned, premium=False)."""
        return alerts.list_subscriptions(self.context, proof)

    def get_subscription(self, proof: Authorized, subscription_id: uuid.UUID) -> Subscription:
        """The caller's user's subscription; NotFound for another user's or an unknown one."""
        return alerts.get_subscription(self.context, proof, subscription_id)

    def delete_subscription(self, proof: Authorized, subscription_id: uuid.UUID) -> None:
        """Delete the caller's user's subscription; NotFound as `get_subscription`."""
        alerts.delete_subscription(self.context, proof, subscription_id)

    def rotate_subscription_secret(
        self, proof: Authorized, subscription_id: uuid.UUID
    ) -> RotatedSecret:
        """A new webhook secret for the caller's user's subscription, the previous one
        signing beside it for `use_cases.alerts.ROTATION_OVERLAP` (proof for
        `Scope.AQ_READ`, user-owned, premium)."""
        return alerts.rotate_secret(self.context, proof, subscription_id)

    # -- alert subscriptions for operators (`cleanair alerts`) -------------------------------

    def operator_subscriptions(
        self, *, owner: str | None = None, status: Status | None = None
    ) -> Iterator[Subscription]:
        """Every user's alert subscriptions in id order, or `owner`'s oldest first; see
        `cleanair_core.use_cases.alert_operators.operator_subscriptions`."""
        return alert_operators.operator_subscriptions(self.context, owner=owner, status=status)

    def subscription_details(self, subscription_id: uuid.UUID) -> SubscriptionDetails:
        """Any user's alert subscription and its state's version; OperatorError if none."""
        return alert_operators.subscription_details(self.context, subscription_id)

    def disable_by_operator(self, subscription_id: uuid.UUID, reason: str) -> DisabledSubscription:
        """Disable any user's alert subscription with a reason its owner reads; see
        `cleanair_core.use_cases.alert_operators.disable_by_operator`."""
        return alert_operators.disable_by_operator(self.context, subscription_id, reason)

    # -- health ----------------------------------------------------------------------------

    async def readiness(self) -> Readiness:
        """Whether the database answers with the current schema and the place data and (unless
        the policy needs none: a scores-only deployment) a street network are loaded; the
        reasons when not. Free, for any caller."""
        return await health.readiness(self.context)
