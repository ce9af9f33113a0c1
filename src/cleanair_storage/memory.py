"""In-memory adapter for every storage port: first-class, for embedding and tests.

One lock makes each operation atomic, matching what the SQLite adapter guarantees.
"""

from __future__ import annotations

import copy
import threading
import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Self

import attrs

from cleanair_core.access.accounts import Owner, OwnerKind, Partner, User
from cleanair_core.access.connections import Connection
from cleanair_core.access.pairing import (
    GUESS_WINDOW,
    GuessLog,
    PairingCode,
    check_guess,
    guess_time,
)
from cleanair_core.air.observations import (
    OBSERVED,
    Observation,
    ObservationsWritten,
    Station,
    StationSummary,
    validate_observations,
)
from cleanair_core.air.pollutants import Pollutant
from cleanair_core.air.wifi import KnownAccessPoint, is_bssid_hash
from cleanair_core.clock import Clock
from cleanair_core.credits.ledger import (
    GRANT_CONNECTION,
    CreditLimits,
    Debit,
    FinalCharge,
    LedgerEntry,
    OverRateLimit,
    Settlement,
    Usage,
    check_fits,
    day_grant_window,
    day_key,
    grant_counted_in,
    grant_window,
    month_key,
    window_keys,
    windows_at,
)
from cleanair_core.errors import CreditsExhausted, DuplicateEntry
from cleanair_core.ports import AdmissionRead
from cleanair_core.routes.network import NetworkSummary, StreetNetwork
from cleanair_core.routes.plans import (
    AnyPlanResult,
    Plan,
    PlanStatus,
    check_new_plan,
    claim_order,
    claimed,
    completed,
    failed,
    handed_back,
    is_claimable,
    on_claim,
)
from cleanair_storage.memory_alerts import MemoryAlertTables


class MemoryStore(MemoryAlertTables):
    """Implements `cleanair_core.ports.Store` in process memory (its alert tables:
    `MemoryAlertTables`)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        super().__init__()
        self._users: dict[str, User] = {}
        self._partners: dict[str, Partner] = {}
        self._connections: dict[uuid.UUID, Connection] = {}
        self._by_hash: dict[str, uuid.UUID] = {}
        self._codes: dict[str, tuple[PairingCode, bool]] = {}
        self._guesses: dict[str, datetime] = {}
        self._entries: list[LedgerEntry] = []
        self._refunded: set[int] = set()
        self._holds: dict[int, datetime] = {}
        self._windows: defaultdict[tuple[str, str], int] = defaultdict(int)
        self._counters: dict[str, tuple[int, int]] = {}
        self._labels: set[str] = set()
        self._access_points: dict[str, KnownAccessPoint] = {}
        self._plans: dict[uuid.UUID, Plan] = {}
        self._networks: dict[str, StreetNetwork] = {}
        self._stations: dict[str, Station] = {}
        self._observations: dict[tuple[str, Pollutant, datetime], float] = {}
        self._observations_version = 0

    def close(self) -> None:
        """Nothing to release."""

    def schema_is_current(self) -> bool:
        """Always: process memory has no stored schema to fall behind or run ahead."""
        return True

    @contextmanager
    def transaction(self) -> Iterator[Self]:
        """The unit of work: the store's (reentrant) lock held for the block, and its state
        put back as it was if an exception leaves it."""
        with self._lock:
            saved = {n: copy.copy(v) for n, v in vars(self).items() if n != "_lock"}
            try:
                yield self
            except BaseException:
                vars(self).update(saved)
                raise

    # accounts
    def add_user(self, user: User) -> bool:
        with self._lock:
            if user.name in self._users:
                return False
            self._users[user.name] = user
            return True

    def get_user(self, name: str) -> User | None:
        with self._lock:
            return self._users.get(name)

    def list_users(self) -> list[User]:
        with self._lock:
            return [self._users[name] for name in sorted(self._users)]

    def set_premium(self, name: str, premium: bool) -> bool:
        with self._lock:
            user = self._users.get(name)
            if user is None:
                return False
            self._users[name] = attrs.evolve(user, premium=premium)
            return True

    def add_partner(self, partner: Partner) -> bool:
        with self._lock:
            if partner.name in self._partners:
                return False
            self._partners[partner.name] = partner
            return True

    def get_partner(self, name: str) -> Partner | None:
        with self._lock:
            return self._partners.get(name)

    def list_partners(self) -> list[Partner]:
        with self._lock:
            return [self._partners[name] for name in sorted(self._partners)]

    def set_partner_active(self, name: str, active: bool) -> bool:
        with self._lock:
            partner = self._partners.get(name)
            if partner is None:
                return False
            self._partners[name] = attrs.evolve(partner, active=active)
            return True

    # connections
    def add_connection(self, connection: Connection) -> None:
        with self._lock:
            if connection.id in self._connections or connection.token_hash in self._by_hash:
                raise DuplicateEntry("a connection with this id or token is already stored")
            self._connections[connection.id] = connection
            self._by_hash[connection.token_hash] = connection.id

    def connection_by_token_hash(self, token_hash: str) -> Connection | None:
        with self._lock:
            connection_id = self._by_hash.get(token_hash)
            return None if connection_id is None else self._connections[connection_id]

    def admission(self, token_hash: str, rate_limit: str, at: datetime) -> AdmissionRead:
        with self._lock:
            connection = self.connection_by_token_hash(token_hash)
            if connection is None:
                return AdmissionRead(None)
            owner = connection.owner
            account = (
                self._users.get(owner.name)
                if owner.kind is OwnerKind.USER
                else self._partners.get(owner.name)
            )
            standing = (
                None
                if account is None
                else account.premium
                if isinstance(account, User)
                else account.active
            )
            return AdmissionRead(
                connection,
                standing,
                self._counters.get(f"{rate_limit}:{connection.id}"),
                self.usage(owner.key, at),
            )

    def connections_of(self, owner: Owner) -> list[Connection]:
        with self._lock:
            found = [c for c in self._connections.values() if c.owner == owner]
        return sorted(found, key=lambda c: c.created_at)

    def revoke_connection(self, connection_id: uuid.UUID, at: datetime) -> bool:
        with self._lock:
            connection = self._connections.get(connection_id)
            if connection is None or connection.revoked:
                return False
            self._connections[connection_id] = attrs.evolve(connection, revoked_at=at)
            return True

    # pairing codes
    def add_pairing_code(self, code: PairingCode, now: datetime) -> bool:
        with self._lock:
            existing = self._codes.get(code.code_hash)
            if existing is not None and not existing[1] and now < existing[0].expires_at:
                return False
            for code_hash in [h for h, (c, _) in self._codes.items() if c.expires_at <= now]:
                del self._codes[code_hash]
            self._codes[code.code_hash] = (code, False)
            return True

    def redeem_pairing_code(self, code_hash: str, clock: Clock, budget: int) -> str | None:
        with self._lock:
            now = guess_time(clock.now(), max(self._guesses.values(), default=None))
            horizon = now - GUESS_WINDOW
            self._guesses = {h: at for h, at in self._guesses.items() if at > horizon}
            oldest = min(self._guesses.values(), default=None)
            log = GuessLog(code_hash in self._guesses, len(self._guesses), oldest)
            check_guess(log, budget, now)
            self._guesses[code_hash] = now
            existing = self._codes.get(code_hash)
            if existing is None or existing[1] or now >= existing[0].expires_at:
                return None
            self._codes[code_hash] = (existing[0], True)
            return existing[0].user

    # credit ledger
    def debit(self, debit: Debit, limits: CreditLimits) -> LedgerEntry:
        with self._lock:
            check_fits(self.usage(debit.pool, debit.at), debit.amount, limits, debit.at)
            entry = self._append(
                debit.pool,
                debit.connection_id,
                debit.label,
                debit.amount,
                debit.at,
                month_key(debit.at),
                day_key(debit.at),
                None,
            )
            if debit.hold_until is not None:
                self._holds[entry.id] = debit.hold_until
            return entry

    def settle_charges(
        self, charges: Sequence[FinalCharge], limits: CreditLimits
    ) -> list[Settlement]:
        settled: list[Settlement] = []
        with self._lock:
            for charge in charges:
                hit = charge.hit
                if hit is not None and (
                    self.hit(hit.key, hit.window_start, hit.window_seconds) > hit.limit
                ):
                    settled.append(OverRateLimit())
                    continue
                try:
                    settled.append(self.debit(charge.debit, limits))
                except CreditsExhausted as exc:
                    settled.append(exc)
        return settled

    def refund(self, entry_id: int, at: datetime) -> LedgerEntry | None:
        with self._lock:
            if entry_id in self._refunded:
                return None
            original = next((e for e in self._entries if e.id == entry_id), None)
            if original is None or original.reverses is not None or original.is_grant:
                return None
            self._refunded.add(entry_id)
            self._holds.pop(entry_id, None)
            return self._append(
                original.pool,
                original.connection_id,
                original.label,
                -original.amount,
                at,
                original.month,
                original.day,
                original.id,
            )

    def confirm_charge(self, entry_id: int) -> bool:
        with self._lock:
            return self._holds.pop(entry_id, None) is not None

    def renew_holds(self, entry_ids: Sequence[int], until: datetime) -> int:
        with self._lock:
            held = [entry_id for entry_id in entry_ids if entry_id in self._holds]
            for entry_id in held:
                self._holds[entry_id] = until
            return len(held)

    def sweep_holds(self, now: datetime, plan_error: str) -> int:
        with self._lock:
            ended = sorted(entry_id for entry_id, until in self._holds.items() if until <= now)
            for entry_id in ended:
                self.refund(entry_id, now)
                for plan in list(self._plans.values()):
                    if plan.ledger_entry == entry_id:
                        self.fail_plan(plan.id, plan_error, now)
            return len(ended)

    def _append(
        self,
        pool: str,
        connection_id: str,
        label: str,
        amount: int,
        at: datetime,
        month: str,
        day: str,
        reverses: int | None,
    ) -> LedgerEntry:
        entry = LedgerEntry(
            len(self._entries) + 1, pool, connection_id, label, amount, at, month, day, reverses
        )
        self._entries.append(entry)
        for key in window_keys(month, day):
            self._windows[(pool, key)] += amount
        return entry

    def grant(
        self, pool: str, amount: int, reason: str, at: datetime, *, day_only: bool = False
    ) -> LedgerEntry:
        label, window = grant_counted_in(at, day_only=day_only)
        with self._lock:
            entry = LedgerEntry(
                len(self._entries) + 1,
                pool,
                GRANT_CONNECTION,
                label,
                amount,
                at,
                month_key(at),
                day_key(at),
                reason=reason,
            )
            self._entries.append(entry)
            self._windows[(pool, window)] += amount
            return entry

    def usage(self, pool: str, at: datetime) -> Usage:
        month_window, day_window = windows_at(at)
        with self._lock:
            return Usage(
                month=self._windows.get((pool, month_window), 0),
                day=self._windows.get((pool, day_window), 0),
                granted=self._windows.get((pool, grant_window(month_key(at))), 0),
                day_granted=self._windows.get((pool, day_grant_window(day_key(at))), 0),
            )

    def usage_by_label(self, pool: str, month: str) -> dict[str, int]:
        totals: defaultdict[str, int] = defaultdict(int)
        with self._lock:
            for entry in self._entries:
                if entry.pool == pool and entry.month == month and not entry.is_grant:
                    totals[entry.label] += entry.amount
        return dict(totals)

    def entries(self, pool: str) -> list[LedgerEntry]:
        with self._lock:
            return [e for e in self._entries if e.pool == pool]

    # rate-limit counters
    def hit(self, key: str, window_start: int, window_seconds: int = 60) -> int:
        with self._lock:
            start, count = self._counters.get(key, (window_start, 0))
            # See RateLimitStore.hit: only a newer window, or one from a clock far ahead,
            # starts the counter again.
            if window_start > start or window_start < start - window_seconds:
                start, count = window_start, 1
            else:
                count += 1
            self._counters[key] = (start, count)
            return count

    # client labels
    def add_client_label(self, label: str, at: datetime) -> bool:
        with self._lock:
            if label in self._labels:
                return False
            self._labels.add(label)
            return True

    def is_client_label(self, label: str) -> bool:
        with self._lock:
            return label in self._labels

    # Wi-Fi access points (keyed by BSSID hash only)
    def put_access_points(self, entries: Iterable[tuple[str, KnownAccessPoint]]) -> int:
        rows = list(entries)
        if not all(is_bssid_hash(bssid_hash) for bssid_hash, _ in rows):
            raise ValueError("access points are stored under a BSSID hash, never a raw BSSID")
        with self._lock:
            self._access_points.update(rows)
        return len(rows)

    def find_access_points(self, bssid_hashes: Sequence[str]) -> Mapping[str, KnownAccessPoint]:
        with self._lock:
            return {h: self._access_points[h] for h in bssid_hashes if h in self._access_points}

    def count_access_points(self) -> int:
        with self._lock:
            return len(self._access_points)

    # station observations
    def put_stations(self, stations: Iterable[Station]) -> int:
        given = list(stations)
        if not given:  # nothing written: the version stays, as on the durable adapters
            return 0
        with self._lock:
            self._stations.update((station.id, station) for station in given)
            self._observations_version += 1
        return len(given)

    def put_observations(self, observations: Iterable[Observation]) -> ObservationsWritten:
        with self._lock:
            checked = validate_observations(observations, self._stations)
            added = replaced = unchanged = 0
            for observation in checked:
                key = (observation.station_id, observation.pollutant, observation.hour_end)
                stored = self._observations.get(key)
                if stored is None:
                    added += 1
                elif stored == observation.value:
                    unchanged += 1
                    continue
                else:
                    replaced += 1
                self._observations[key] = observation.value
            if added or replaced:
                self._observations_version += 1
            return ObservationsWritten(added, replaced, unchanged)

    def list_stations(self) -> list[Station]:
        with self._lock:
            return [self._stations[key] for key in sorted(self._stations)]

    def station_summaries(self) -> list[StationSummary]:
        with self._lock:
            hours: defaultdict[str, list[datetime]] = defaultdict(list)
            for station_id, _, hour_end in self._observations:
                hours[station_id].append(hour_end)
            return [
                StationSummary(
                    self._stations[key],
                    len(hours[key]),
                    min(hours[key], default=None),
                    max(hours[key], default=None),
                )
                for key in sorted(self._stations)
            ]

    def observations_between(
        self, start: datetime, end: datetime, pollutants: Sequence[Pollutant] = OBSERVED
    ) -> list[Observation]:
        wanted = set(pollutants)
        with self._lock:
            found = [
                Observation(station_id, pollutant, hour_end, value)
                for (station_id, pollutant, hour_end), value in self._observations.items()
                if pollutant in wanted and start <= hour_end <= end
            ]
        found.sort(key=lambda o: (o.hour_end, o.station_id, o.pollutant))
        return found

    def observations_version(self) -> int:
        with self._lock:
            return self._observations_version

    def delete_observations_before(self, cutoff: datetime) -> int:
        with self._lock:
            old = [key for key in self._observations if key[2] < cutoff]
            for key in old:
                del self._observations[key]
            if old:
                self._observations_version += 1
            return len(old)

    # route plans (the lock is reentrant: a plan and its ledger entry change under one hold)
    def add_plan(self, plan: Plan) -> None:
        check_new_plan(plan)
        with self._lock:
            if plan.id in self._plans:
                raise DuplicateEntry("a plan with this id is already stored")
            self._plans[plan.id] = plan

    def get_plan(self, plan_id: uuid.UUID) -> Plan | None:
        with self._lock:
            return self._plans.get(plan_id)

    def claim_plan(self, now: datetime, lease: timedelta) -> Plan | None:
        with self._lock:
            claimable = [plan for plan in self._plans.values() if is_claimable(plan, now)]
            if not claimable:
                return None
            taken = claimed(min(claimable, key=claim_order), now, lease)
            self._plans[taken.id] = taken
            return taken

    def renew_lease(self, plan_id: uuid.UUID, until: datetime, claim: int | None = None) -> bool:
        with self._lock:
            plan = self._plans.get(plan_id)
            if plan is None or not on_claim(plan, claim):
                return False
            self._plans[plan_id] = attrs.evolve(plan, lease_until=until)
            return True

    def release_plan(self, plan_id: uuid.UUID, claim: int | None = None) -> bool:
        with self._lock:
            plan = self._plans.get(plan_id)
            if plan is None or not on_claim(plan, claim):
                return False
            self._plans[plan_id] = handed_back(plan)
            return True

    def complete_plan(
        self, plan_id: uuid.UUID, result: AnyPlanResult, now: datetime, claim: int | None = None
    ) -> bool:
        with self._lock:
            plan = self._plans.get(plan_id)
            if plan is None or not on_claim(plan, claim):
                return False
            self._plans[plan_id] = completed(plan, result, now)
            return True

    def fail_plan(
        self, plan_id: uuid.UUID, error: str, now: datetime, claim: int | None = None
    ) -> Plan | None:
        with self._lock:
            plan = self._plans.get(plan_id)
            if plan is None or not on_claim(plan, claim):
                return None
            self._plans[plan_id] = done = failed(plan, error, now)
            return done

    def prune_plans(self, finished_before: datetime) -> int:
        with self._lock:
            pruned = [
                plan.id
                for plan in self._plans.values()
                if plan.status is not PlanStatus.PENDING
                and plan.finished_at is not None
                and plan.finished_at < finished_before
            ]
            for plan_id in pruned:
                del self._plans[plan_id]
            return len(pruned)

    # street networks (kept as the objects given: their arrays are shared, not copied)
    def save_network(self, network: StreetNetwork) -> None:
        with self._lock:
            self._networks[network.name] = network

    def load_networks(self) -> list[StreetNetwork]:
        with self._lock:
            return [self._networks[name] for name in sorted(self._networks)]

    def network_summaries(self) -> list[NetworkSummary]:
        with self._lock:
            networks = [self._networks[name] for name in sorted(self._networks)]
        return [
            NetworkSummary(
                name=network.name,
                nodes=network.node_count,
                edges=network.edge_count,
                bounds=network.bounds,
                source=network.source,
                imported_at=network.imported_at,
            )
            for network in networks
        ]

    def delete_network(self, name: str) -> bool:
        with self._lock:
            return self._networks.pop(name, None) is not None
