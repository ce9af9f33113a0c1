"""`CleanAir`: the core's use cases behind one object, for the HTTP app and embedders alike."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import date, datetime, timedelta

from cleanair_core.access.accounts import Owner, OwnerKind, Partner, User, validate_account_name
from cleanair_core.access.connections import (
    Authorized,
    Caller,
    Connection,
    IssuedConnection,
    authenticate,
    require_premium,
)
from cleanair_core.access.pairing import PAIRING_CODE_TTL, PairingCode, is_well_formed, new_code
from cleanair_core.access.scopes import USER_SCOPES, Scope
from cleanair_core.access.tokens import issue_token
from cleanair_core.air.activities import ActivityType, speed_m_s
from cleanair_core.air.exposure import EnvironmentType
from cleanair_core.air.forecast import Forecast, forecast_hours
from cleanair_core.air.forecast_window import check_in_window, local_day_hours, parse_timezone
from cleanair_core.air.places import Place
from cleanair_core.air.point_score import PointScore, resolve_point, score_at
from cleanair_core.air.wifi import WifiAccessPoint
from cleanair_core.clock import Clock, SystemClock
from cleanair_core.credits import rate_limits
from cleanair_core.credits.attribution import attribution_label, validate_client_label
from cleanair_core.credits.charging import Charge, HeldCharges
from cleanair_core.credits.ledger import (
    Billable,
    Debit,
    Quota,
    cost_of,
    month_key,
    quota_of,
)
from cleanair_core.credits.rate_limits import RateLimit
from cleanair_core.errors import (
    InvalidPairingCode,
    LocationUnresolved,
    NotFound,
    OperatorError,
    PlanRejected,
    PlanTooLong,
    SourceUnavailable,
    Unprocessable,
)
from cleanair_core.geo import Point, distance_m
from cleanair_core.keys import TokenKeys
from cleanair_core.policy import Policy
from cleanair_core.ports import Sources, Store
from cleanair_core.routes.enrichment import MAX_WAYPOINTS, EnrichedRoute, Waypoint, enrich_route
from cleanair_core.routes.network import PlanActivityType
from cleanair_core.routes.plan_documents import encode_plan_result
from cleanair_core.routes.planner import Offload, plan_routes
from cleanair_core.routes.plans import (
    MAX_PLAN_DISTANCE_M,
    UNDELIVERED_PLAN_ERROR,
    Plan,
    PlanRequest,
    PlanStatus,
)
from cleanair_core.routes.times import as_utc, check_data_window, waypoint_times


class CleanAir:
    """Use cases of the service over a `Store`, a clock and the server's token keys."""

    def __init__(
        self,
        store: Store,
        keys: TokenKeys,
        policy: Policy | None = None,
        clock: Clock | None = None,
        randbelow: Callable[[int], int] = secrets.randbelow,
        sources: Sources | None = None,
    ) -> None:
        self.store = store
        self.sources = sources
        self.keys = keys
        self.policy = policy or Policy()
        self.clock: Clock = clock or SystemClock()
        self._randbelow = randbelow
        #: The charges this object has reserved and not yet settled: `renew_charge_holds`
        #: keeps them from being swept while their calls run.
        self.held_charges = HeldCharges()

    # -- operator use cases (the CLI stands in for the companion app and partner agreements) --

    def add_user(self, name: str, *, premium: bool = True) -> User:
        user = User(validate_account_name(name), premium, self.clock.now())
        if not self.store.add_user(user):
            raise OperatorError(f"user {name} already exists")
        return user

    def set_premium(self, name: str, premium: bool) -> None:
        if not self.store.set_premium(name, premium):
            raise OperatorError(f"no user {name}")

    def create_pairing_code(self, user_name: str) -> str:
        """A fresh code for a premium user, as the companion app would show it."""
        user = self.store.get_user(user_name)
        if user is None:
            raise OperatorError(f"no user {user_name}")
        if not user.premium:
            raise OperatorError(f"user {user_name} has no premium plan; pairing needs one")
        now = self.clock.now()
        while True:  # a live code with the same digits is astronomically rare; draw again
            code = new_code(self._randbelow)
            stored = PairingCode(
                self.keys.hash_pairing_code(code), user.name, now, now + PAIRING_CODE_TTL
            )
            if self.store.add_pairing_code(stored, now):
                return code

    def add_partner(self, name: str) -> Partner:
        partner = Partner(validate_account_name(name), True, self.clock.now())
        if not self.store.add_partner(partner):
            raise OperatorError(f"partner {name} already exists")
        return partner

    def deactivate_partner(self, name: str) -> None:
        if not self.store.set_partner_active(name, False):
            raise OperatorError(f"no partner {name}")

    def issue_partner_token(
        self, partner_name: str, connection_name: str, scopes: Iterable[Scope]
    ) -> IssuedConnection:
        partner = self.store.get_partner(partner_name)
        if partner is None:
            raise OperatorError(f"no partner {partner_name}")
        if not partner.active:
            raise OperatorError(f"partner {partner_name} is deactivated")
        owner = Owner(OwnerKind.PARTNER, partner.name)
        return self._new_connection(owner, connection_name, frozenset(scopes))

    def connections_of_user(self, name: str) -> list[Connection]:
        if self.store.get_user(name) is None:
            raise OperatorError(f"no user {name}")
        return self.store.connections_of(Owner(OwnerKind.USER, name))

    def revoke_connection(self, connection_id: uuid.UUID) -> None:
        if not self.store.revoke_connection(connection_id, self.clock.now()):
            raise OperatorError(f"no active connection {connection_id}")

    def add_client_label(self, label: str) -> None:
        if not self.store.add_client_label(validate_client_label(label), self.clock.now()):
            raise OperatorError(f"client label {label} already exists")

    def usage_by_label(self, user_name: str) -> dict[str, int]:
        """This month's net credits per attribution label for a user."""
        if self.store.get_user(user_name) is None:
            raise OperatorError(f"no user {user_name}")
        pool = Owner(OwnerKind.USER, user_name).key
        return self.store.usage_by_label(pool, month_key(self.clock.now()))

    # -- API use cases -----------------------------------------------------------------------

    def redeem_pairing_code(self, code: str, name: str, client_address: str) -> IssuedConnection:
        """Exchange a pairing code for a user connection with the pairing scopes.

        Raises RateLimited when the address's attempts or the global guess budget are spent,
        and InvalidPairingCode (one error for every cause) when the code cannot be redeemed.
        """
        now = self.clock.now()
        rate_limits.enforce(self.store, self.policy.pairing_attempts, client_address, now)
        if not is_well_formed(code):
            raise InvalidPairingCode()
        code_hash = self.keys.hash_pairing_code(code)
        user_name = self.store.redeem_pairing_code(
            code_hash, self.clock, self.policy.pairing_guess_budget
        )
        user = self.store.get_user(user_name) if user_name is not None else None
        if user is None or not user.premium:
            raise InvalidPairingCode()
        return self._new_connection(Owner(OwnerKind.USER, user.name), name, USER_SCOPES)

    def authenticate(self, token: str) -> Caller:
        """The caller behind a raw bearer token; raises NotAuthenticated."""
        return authenticate(
            token,
            environment=self.policy.environment,
            keys=self.keys,
            connections=self.store,
            accounts=self.store,
        )

    def require_premium(self, caller: Caller) -> None:
        """Raise NotPremium unless the caller's owner (still) has a premium plan."""
        require_premium(caller, self.store)

    def enforce_rate_limit(self, caller: Caller, rule: RateLimit | None = None) -> None:
        """Count a request of `caller` against `rule` (default: the general request limit)."""
        rule = rule or self.policy.requests
        rate_limits.enforce(self.store, rule, str(caller.connection_id), self.clock.now())

    def quota(self, caller: Caller) -> Quota:
        usage = self.store.usage(caller.owner.key, self.clock.now())
        return quota_of(usage, self.policy.credits)

    def charge(
        self, caller: Caller, billable: Billable, units: int = 1, client: str | None = None
    ) -> Charge:
        """A held reservation of the call's cost, to use as a (sync or async) context
        manager: final when the block ends without error, refunded when it raises, and
        refunded by `sweep_charge_holds` if the process dies in between."""
        now = self.clock.now()
        debit = Debit(
            pool=caller.owner.key,
            connection_id=str(caller.connection_id),
            label=attribution_label(client, billable, self.store),
            amount=cost_of(billable, units),
            at=now,
            hold_until=now + self.policy.charge_hold,
        )
        return Charge(self.store, debit, self.policy.credits, self.clock, self.held_charges)

    def renew_charge_holds(self) -> int:
        """Keep the holds of this object's calls in progress from ending (call it every
        `hold_renewal_every(policy.charge_hold)` seconds); the number renewed."""
        ids = self.held_charges.ids()
        if not ids:
            return 0
        return self.store.renew_holds(ids, self.clock.now() + self.policy.charge_hold)

    def sweep_charge_holds(self) -> int:
        """Refund the charges whose holds ended unconfirmed: their process died before it
        answered. A route plan paid by one fails. Any process sharing the store may sweep."""
        return self.store.sweep_holds(self.clock.now(), UNDELIVERED_PLAN_ERROR)

    async def score(
        self,
        who: Caller | Authorized,
        *,
        point: Point | None = None,
        wifi: Sequence[WifiAccessPoint] = (),
        client: str | None = None,
    ) -> PointScore:
        """The Clean Air Score at a point, or at the place a Wi-Fi scan resolves to (1 credit).

        Coordinates win over the scan (no lookup is made). Raises Unprocessable (not charged)
        when neither is given, LocationUnresolved (refunded) when the scan cannot be resolved
        and SourceUnavailable (refunded) without data.
        """
        caller = self._authorize(who, Scope.AQ_READ)
        if point is None and not wifi:
            raise Unprocessable()  # at least one location source is a rule of the request
        sources = self._sources()
        async with self.charge(caller, Billable.SCORE, client=client):
            located = await resolve_point(point, wifi, sources.wifi)
            return await score_at(sources.air_quality, located, self.clock.now())

    async def forecast(
        self,
        who: Caller | Authorized,
        *,
        day: date,
        timezone: str,
        point: Point | None = None,
        activity: ActivityType = ActivityType.OTHER,
        environment: EnvironmentType = EnvironmentType.OUTDOOR,
        client_address: str | None = None,
    ) -> Forecast:
        """Hourly scores and concentrations for the local `day` in `timezone` (2 credits).

        Without a point the caller's address gives an approximate one. Raises Unprocessable for
        an unknown timezone, OutsideForecastWindow outside today .. today + 3 there, and
        LocationUnresolved without a location; none of them is charged.
        """
        caller = self._authorize(who, Scope.AQ_READ)
        zone = parse_timezone(timezone)
        check_in_window(day, zone, self.clock.now())
        sources = self._sources()
        place = _forecast_place(sources, point, client_address)
        async with self.charge(caller, Billable.FORECAST):
            return await forecast_hours(
                sources.air_quality,
                place.point,
                place.name,
                local_day_hours(day, zone),
                activity,
                environment,
            )

    async def enrich_route(
        self,
        who: Caller | Authorized,
        *,
        waypoints: Sequence[Waypoint],
        start_time: datetime | None = None,
        activity: ActivityType = ActivityType.OTHER,
        environment: EnvironmentType = EnvironmentType.OUTDOOR,
    ) -> EnrichedRoute:
        """Measures at every waypoint at its own time and the route's summary (1 credit each).

        Times are the waypoints' own (a recorded track) or estimated from `start_time` at the
        activity's speed. Raises Unprocessable for 0 or over 100 waypoints, mixed times, no
        times and no `start_time`, or times going backwards; OutsideDataWindow when a time
        (or `start_time`) is over 30 days ago or beyond 84 hours ahead; neither is charged.
        SourceUnavailable (refunded) when no waypoint has data.
        """
        caller = self._authorize(who, Scope.AQ_ROUTES)
        if not 1 <= len(waypoints) <= MAX_WAYPOINTS:
            raise Unprocessable()
        points = [waypoint.point for waypoint in waypoints]
        times = waypoint_times(points, [w.time for w in waypoints], start_time, speed_m_s(activity))
        given = [as_utc(start_time)] if start_time is not None else []
        check_data_window(given + times, self.clock.now())
        sources = self._sources()
        async with self.charge(caller, Billable.ROUTE_ENRICHMENT, units=len(waypoints)):
            return await enrich_route(sources.air_quality, points, times, activity, environment)

    def submit_plan(
        self,
        who: Caller | Authorized,
        *,
        start: Point,
        end: Point,
        activity: PlanActivityType,
        start_time: datetime | None = None,
    ) -> uuid.UUID:
        """Store a route plan as pending and charge 25 credits; returns its request id.

        Raises PartnerConnectionRefused for a partner connection, PlanTooLong (not charged)
        when start and end are over 15 km apart, OutsideDataWindow (not charged) for a start
        time outside the window air data exists for, CreditsExhausted when it does not fit.
        """
        caller = self._authorize(who, Scope.ROUTES_PLAN)
        caller.require_user_owned()
        if distance_m(start, end) > MAX_PLAN_DISTANCE_M:
            raise PlanTooLong()
        now = self.clock.now()
        when = now if start_time is None else as_utc(start_time)
        check_data_window([when], now)
        plan = Plan(
            id=uuid.uuid4(),
            owner=caller.owner.name,
            connection_id=str(caller.connection_id),
            request=PlanRequest(start, end, activity, when),
            status=PlanStatus.PENDING,
            created_at=now,
        )
        charge = self.charge(caller, Billable.ROUTE_PLAN)
        stored = self.store.submit_plan(plan, charge.debit, self.policy.credits)
        if stored.ledger_entry is not None:  # final now that the answer is on its way
            self.store.confirm_charge(stored.ledger_entry)
        return stored.id

    def poll_plan(self, caller: Caller, plan_id: uuid.UUID) -> Plan:
        """The plan `plan_id` if it belongs to the caller's user (scope routes:plan; free; not
        premium-gated). Raises NotFound for an unknown plan or another user's."""
        caller.require_scope(Scope.ROUTES_PLAN)
        plan = self.store.get_plan(plan_id)
        if plan is None or caller.owner.kind is not OwnerKind.USER:
            raise NotFound()
        if plan.owner != caller.owner.name:
            raise NotFound()  # indistinguishable from unknown, on purpose
        return plan

    def claim_next_plan(self) -> Plan | None:
        """Take the oldest pending plan no live worker holds (None when there is none)."""
        return self.store.claim_plan(self.clock.now(), self.policy.plan_lease)

    async def run_plan(self, plan: Plan, offload: Offload | None = None) -> None:
        """Plan a claimed plan and store its outcome.

        A rejected plan or a source outage fails with a readable reason and is refunded; so is
        a plan whose worker died `max_plan_attempts` times. Any other error fails and refunds
        the plan too, then propagates for the caller to log.
        """
        if plan.attempts > self.policy.max_plan_attempts:
            self._fail(plan, "Planning failed repeatedly; the plan was refunded")
            return
        sources = self.sources
        try:
            if sources is None or sources.networks is None:
                raise PlanRejected("No street network is loaded")
            result = await plan_routes(plan.request, sources.networks, sources.air_quality, offload)
        except PlanRejected as rejected:
            self._fail(plan, rejected.detail)
        except SourceUnavailable:
            self._fail(plan, "Air-quality data is unavailable; the plan was refunded")
        except Exception:
            self._fail(plan, "Planning failed because of an internal error; refunded")
            raise
        else:
            self.store.complete_plan(plan.id, encode_plan_result(result), self.clock.now())

    async def work_on_next_plan(self, offload: Offload | None = None) -> Plan | None:
        """Claim and run one plan; the plan taken, or None when there was none."""
        plan = self.claim_next_plan()
        if plan is not None:
            await self.run_plan(plan, offload)
        return plan

    def renew_plan_lease(self, plan_id: uuid.UUID) -> bool:
        """Keep holding a plan being worked on (call well within the lease)."""
        return self.store.renew_lease(plan_id, self.clock.now() + self.policy.plan_lease)

    def prune_plans(self) -> int:
        """Delete plans finished longer ago than the retention period."""
        cutoff = self.clock.now() - timedelta(seconds=self.policy.plan_retention_seconds)
        return self.store.prune_plans(cutoff)

    def _fail(self, plan: Plan, reason: str) -> None:
        self.store.fail_plan(plan.id, reason, self.clock.now(), refund=True)

    def authorize(self, caller: Caller, scope: Scope) -> Authorized:
        """Check `scope` and the owner's premium plan; raises MissingScope or NotPremium."""
        caller.require_scope(scope)
        self.require_premium(caller)
        return Authorized(caller, scope)

    def _authorize(self, who: Caller | Authorized, scope: Scope) -> Caller:
        if isinstance(who, Authorized) and who.scope is scope:
            return who.caller
        caller = who.caller if isinstance(who, Authorized) else who
        return self.authorize(caller, scope).caller

    def _sources(self) -> Sources:
        if self.sources is None:
            raise SourceUnavailable("No air-quality source is configured")
        return self.sources

    def _new_connection(
        self, owner: Owner, name: str, scopes: frozenset[Scope]
    ) -> IssuedConnection:
        if not 1 <= len(name) <= 100:
            raise ValueError("a connection name is 1 to 100 characters")
        token = issue_token(self.policy.environment)
        connection = Connection(
            id=uuid.uuid4(),
            owner=owner,
            name=name,
            scopes=scopes,
            token_hash=self.keys.hash_token(token),
            created_at=self.clock.now(),
        )
        self.store.add_connection(connection)
        return IssuedConnection(connection, token)


def _forecast_place(sources: Sources, point: Point | None, client_address: str | None) -> Place:
    """The named point of a forecast: the given one, else the caller's address's country."""
    if point is not None:
        if sources.places is not None:
            return Place(sources.places.name_of(point), point)
        return Place(f"{point.lat:.4f}, {point.lon:.4f}", point)
    place = None
    if client_address is not None and sources.ip is not None:
        place = sources.ip.locate(client_address)
    if place is None:
        raise LocationUnresolved()
    return place
