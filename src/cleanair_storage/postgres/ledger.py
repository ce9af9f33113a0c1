"""PostgreSQL: the credit ledger, its windows and charge holds (`CreditLedger`).

A debit is one conditional statement on the pool's two window counters: each is added to
only where it stays within its limit, and PostgreSQL locks the counter row and re-checks the
condition against its latest committed value, so no number of processes on any number of
machines can overspend. Debits of different pools do not wait for each other. A refund
locks the debit's ledger row first, so it is reversed at most once however many refunds race
(and the ledger's unique `reverses` backs that up).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg
import psycopg.errors

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
from cleanair_core.errors import CreditsExhausted, StoreUnavailable
from cleanair_storage.postgres.arrays import array_literal
from cleanair_storage.postgres.database import FAIL_PENDING_PLAN, Connection, PostgresDatabase
from cleanair_storage.postgres.settle import SETTLE

#: Times a debit is tried when its windows refuse it but then show room (a refund between).
_DEBIT_TRIES = 3
#: A debit as one statement (see `PostgresLedger._debit`).
_DEBIT = (
    "WITH granted AS ("
    ' INSERT INTO credit_windows (pool, "window", used)'
    " VALUES (%(pool)s, %(mw)s, %(amount)s), (%(pool)s, %(dw)s, %(amount)s)"
    ' ON CONFLICT (pool, "window") DO UPDATE'
    " SET used = credit_windows.used + EXCLUDED.used"
    " WHERE credit_windows.used + EXCLUDED.used <= CASE"
    ' WHEN credit_windows."window" = %(mw)s THEN %(monthly)s + COALESCE((SELECT g.used'
    ' FROM credit_windows g WHERE g.pool = %(pool)s AND g."window" = %(gw)s), 0)'
    " ELSE %(daily)s + COALESCE((SELECT g.used FROM credit_windows g"
    ' WHERE g.pool = %(pool)s AND g."window" = %(gdw)s), 0) END'
    ' RETURNING "window"),'
    " entry AS ("
    " INSERT INTO ledger (pool, connection_id, label, amount, at, month, day)"
    " SELECT %(pool)s, %(conn)s, %(label)s, %(amount)s, %(at)s, %(month)s, %(day)s"
    " WHERE (SELECT count(*) FROM granted) = 2 RETURNING id),"
    " hold AS ("
    " INSERT INTO charge_holds (entry_id, until)"
    " SELECT id, %(until)s FROM entry WHERE %(until)s::timestamptz IS NOT NULL)"
    " SELECT (SELECT id FROM entry),"
    " 1 / (CASE (SELECT count(*) FROM granted) WHEN 1 THEN 0 ELSE 1 END)"
)


def _refusal(debit: Debit, usage: Usage, limits: CreditLimits) -> CreditsExhausted:
    """Why `debit` did not fit `usage`: the window that blocks it, and until when."""
    try:
        check_fits(usage, debit.amount, limits, debit.at)
    except CreditsExhausted as exc:
        return exc
    raise AssertionError("the settle function refused a debit that fits")


def settle_arguments(
    charges: Sequence[FinalCharge], limits: CreditLimits
) -> tuple[list[int], tuple[object, ...]]:
    """The order `SETTLE` takes `charges` in (indexes into them) and its arguments.

    Pools in one order in every batch (see `settle`), so batches never deadlock; a pool's
    own charges keep theirs, as the port promises."""
    order = sorted(range(len(charges)), key=lambda i: charges[i].debit.pool)
    batch = [charges[i] for i in order]
    debits = [c.debit for c in batch]
    # Each column as an array literal (`array_literal`): far less CPU than a list.
    return order, (
        array_literal([None if c.hit is None else c.hit.key for c in batch]),
        array_literal([0 if c.hit is None else c.hit.window_start for c in batch]),
        array_literal([0 if c.hit is None else c.hit.window_seconds for c in batch]),
        array_literal([0 if c.hit is None else c.hit.limit for c in batch]),
        array_literal([d.pool for d in debits]),
        array_literal([d.connection_id for d in debits]),
        array_literal([d.label for d in debits]),
        array_literal([d.amount for d in debits]),
        array_literal([d.at for d in debits]),
        array_literal([month_key(d.at) for d in debits]),
        array_literal([day_key(d.at) for d in debits]),
        limits.monthly,
        limits.daily,
    )


def settlements(
    charges: Sequence[FinalCharge],
    order: list[int],
    rows: Sequence[tuple[Any, ...]],
    limits: CreditLimits,
) -> list[Settlement]:
    """What `SETTLE`'s `rows` say of each of `charges`, in their order."""
    settled: list[Settlement | None] = [None] * len(charges)
    for n, entry_id, month_used, day_used, granted, day_granted in rows:
        index = order[n - 1]
        debit = charges[index].debit
        outcome: Settlement
        if entry_id is not None:
            outcome = LedgerEntry(
                int(entry_id),
                debit.pool,
                debit.connection_id,
                debit.label,
                debit.amount,
                debit.at,
                month_key(debit.at),
                day_key(debit.at),
            )
        elif month_used is None:
            outcome = OverRateLimit()
        else:
            usage = Usage(month_used, day_used, granted, day_granted)
            outcome = _refusal(debit, usage, limits)
        settled[index] = outcome
    return [s for s in settled if s is not None]


class PostgresLedger(PostgresDatabase):
    """The credit ledger: debits checked against the pool's windows, refunds as reversing
    entries, and charge holds."""

    @staticmethod
    def _usage(conn: Connection, pool: str, at: datetime) -> Usage:
        month, day = windows_at(at)
        granted, day_granted = grant_window(month_key(at)), day_grant_window(day_key(at))
        rows = conn.execute(
            'SELECT "window", used FROM credit_windows '
            'WHERE pool = %s AND "window" IN (%s, %s, %s, %s)',
            (pool, month, day, granted, day_granted),
        ).fetchall()
        used: dict[str, int] = {str(window): int(count) for window, count in rows}
        return Usage(
            month=used.get(month, 0),
            day=used.get(day, 0),
            granted=used.get(granted, 0),
            day_granted=used.get(day_granted, 0),
        )

    @staticmethod
    def _append(
        conn: Connection,
        pool: str,
        connection_id: str,
        label: str,
        amount: int,
        at: datetime,
        month: str,
        day: str,
        reverses: int | None,
    ) -> LedgerEntry:
        row = conn.execute(
            "INSERT INTO ledger (pool, connection_id, label, amount, at, month, day, reverses) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (pool, connection_id, label, amount, at, month, day, reverses),
        ).fetchone()
        assert row is not None
        with conn.cursor() as cur:
            cur.executemany(
                'INSERT INTO credit_windows (pool, "window", used) VALUES (%s, %s, %s) '
                'ON CONFLICT (pool, "window") DO UPDATE SET '
                "used = credit_windows.used + EXCLUDED.used",
                [(pool, key, amount) for key in window_keys(month, day)],
            )
        return LedgerEntry(
            int(row[0]), pool, connection_id, label, amount, at, month, day, reverses
        )

    @classmethod
    def _debit(cls, conn: Connection, debit: Debit, limits: CreditLimits) -> LedgerEntry:
        # A window's first debit inserts its row unconditionally: so first, does the amount
        # fit an empty pool at all? When it does not, the pool's real usage says which window
        # blocks (a month already spent answers before a day the amount alone exceeds).
        # (Unless the month's or the day's grants make room for it: then the real usage lets
        # it through.)
        try:
            check_fits(Usage(0, 0), debit.amount, limits, debit.at)
        except CreditsExhausted:
            check_fits(cls._usage(conn, debit.pool, debit.at), debit.amount, limits, debit.at)
        month_window, day_window = windows_at(debit.at)
        # The atomic conditional: each window's counter is added to only where it stays
        # within its limit. ON CONFLICT locks the counter row and re-checks the condition
        # against its latest committed value, so concurrent debits of one pool, in any
        # process on any machine, can never both take the last credits.
        month, day = month_key(debit.at), day_key(debit.at)
        # One statement: the windows' conditional update, then, only if both windows took
        # the debit, its ledger entry and its hold. Where one window took it and the other
        # did not, the last line divides by zero: the statement fails whole, so nothing is
        # left half-done even in autocommit (no take-back statement, no transaction).
        params = {
            "pool": debit.pool,
            "mw": month_window,
            "dw": day_window,
            "gw": grant_window(month_key(debit.at)),
            "gdw": day_grant_window(day_key(debit.at)),
            "amount": debit.amount,
            "monthly": limits.monthly,
            "daily": limits.daily,
            "conn": debit.connection_id,
            "label": debit.label,
            "at": debit.at,
            "month": month,
            "day": day,
            "until": debit.hold_until,
        }
        for _ in range(_DEBIT_TRIES):
            entry_id = cls._try_debit(conn, params)
            if entry_id is not None:
                break
            # Say which window blocks, and until when. Should the windows have room now (a
            # refund committed since the statement looked), the debit is tried again.
            check_fits(cls._usage(conn, debit.pool, debit.at), debit.amount, limits, debit.at)
        else:
            raise StoreUnavailable()  # the windows kept changing: a retry will do
        return LedgerEntry(
            int(entry_id),
            debit.pool,
            debit.connection_id,
            debit.label,
            debit.amount,
            debit.at,
            month,
            day,
            None,
        )

    @staticmethod
    def _try_debit(conn: Connection, params: dict[str, object]) -> int | None:
        """The debit statement: its ledger entry's id, or None when a window had no room."""
        # Inside a unit of work a failed statement would abort the whole transaction: a
        # savepoint keeps the failure to this statement.
        in_unit_of_work = not conn.autocommit
        if in_unit_of_work:
            conn.execute("SAVEPOINT cleanair_debit")
        try:
            row = conn.execute(_DEBIT, params).fetchone()
        except psycopg.errors.DivisionByZero:
            if in_unit_of_work:
                conn.execute("ROLLBACK TO SAVEPOINT cleanair_debit")
            return None  # one window had no room: nothing was written
        assert row is not None  # the statement's last SELECT always answers one row
        return None if row[0] is None else int(row[0])

    @classmethod
    def _refund(cls, conn: Connection, entry_id: int, at: datetime) -> LedgerEntry | None:
        original = conn.execute(
            "SELECT pool, connection_id, label, amount, month, day FROM ledger "
            "WHERE id = %s AND reverses IS NULL AND reason IS NULL FOR UPDATE",
            (entry_id,),
        ).fetchone()
        if original is None:
            return None
        reversed_already = conn.execute(
            "SELECT 1 FROM ledger WHERE reverses = %s", (entry_id,)
        ).fetchone()
        if reversed_already is not None:
            return None
        conn.execute("DELETE FROM charge_holds WHERE entry_id = %s", (entry_id,))
        pool, connection_id, label, amount, month, day = original
        return cls._append(conn, pool, connection_id, label, -amount, at, month, day, entry_id)

    def debit(self, debit: Debit, limits: CreditLimits) -> LedgerEntry:
        with self._statement() as conn:
            return self._debit(conn, debit, limits)

    def settle_charges(
        self, charges: Sequence[FinalCharge], limits: CreditLimits
    ) -> list[Settlement]:
        if not charges:
            return []
        order, params = settle_arguments(charges, limits)
        with self._statement() as conn:  # one round trip, one transaction
            rows = conn.execute(SETTLE, params).fetchall()
        return settlements(charges, order, rows, limits)

    def refund(self, entry_id: int, at: datetime) -> LedgerEntry | None:
        with self._conn() as conn:
            return self._refund(conn, entry_id, at)

    def confirm_charge(self, entry_id: int) -> bool:
        with self._statement() as conn:
            cur = conn.execute("DELETE FROM charge_holds WHERE entry_id = %s", (entry_id,))
            return cur.rowcount == 1

    def renew_holds(self, entry_ids: Sequence[int], until: datetime) -> int:
        if not entry_ids:
            return 0
        with self._conn() as conn:
            cur = conn.execute(
                "UPDATE charge_holds SET until = %s WHERE entry_id = ANY(%s)",
                (until, list(entry_ids)),
            )
            return cur.rowcount

    def sweep_holds(self, now: datetime, plan_error: str) -> int:
        with self._conn() as conn:
            # SKIP LOCKED: sweepers in several processes take different holds.
            ended = [
                int(row[0])
                for row in conn.execute(
                    "SELECT entry_id FROM charge_holds WHERE until <= %s "
                    "ORDER BY entry_id FOR UPDATE SKIP LOCKED",
                    (now,),
                ).fetchall()
            ]
            for entry_id in ended:
                self._refund(conn, entry_id, now)
                conn.execute(
                    f"{FAIL_PENDING_PLAN} WHERE ledger_entry = %s AND status = 'pending'",
                    (plan_error, now, entry_id),
                )
            return len(ended)

    def grant(
        self, pool: str, amount: int, reason: str, at: datetime, *, day_only: bool = False
    ) -> LedgerEntry:
        month, day = month_key(at), day_key(at)
        label, window = grant_counted_in(at, day_only=day_only)
        with self._conn() as conn:
            row = conn.execute(
                "INSERT INTO ledger (pool, connection_id, label, amount, at, month, day, reason) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                (pool, GRANT_CONNECTION, label, amount, at, month, day, reason),
            ).fetchone()
            assert row is not None
            conn.execute(
                'INSERT INTO credit_windows (pool, "window", used) VALUES (%s, %s, %s) '
                'ON CONFLICT (pool, "window") DO UPDATE SET '
                "used = credit_windows.used + EXCLUDED.used",
                (pool, window, amount),
            )
        return LedgerEntry(
            int(row[0]), pool, GRANT_CONNECTION, label, amount, at, month, day, reason=reason
        )

    def usage(self, pool: str, at: datetime) -> Usage:
        with self._statement() as conn:
            return self._usage(conn, pool, at)

    def usage_by_label(self, pool: str, month: str) -> dict[str, int]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT label, sum(amount) FROM ledger WHERE pool = %s AND month = %s "
                "AND reason IS NULL GROUP BY label",
                (pool, month),
            ).fetchall()
        return {str(label): int(total) for label, total in rows}

    def entries(self, pool: str) -> list[LedgerEntry]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT id, pool, connection_id, label, amount, at, month, day, reverses, reason "
                "FROM ledger WHERE pool = %s ORDER BY id",
                (pool,),
            ).fetchall()
        return [
            LedgerEntry(
                int(r[0]),
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                r[6],
                r[7],
                None if r[8] is None else int(r[8]),
                r[9],
            )
            for r in rows
        ]
