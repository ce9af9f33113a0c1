"""SQLite: the credit ledger, its windows and charge holds (`CreditLedger`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

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
from cleanair_core.credits.rate_limits import RateHit
from cleanair_core.errors import CreditsExhausted
from cleanair_storage.sqlite.database import (
    FAIL_PENDING_PLAN,
    LOOKUP_CHUNK,
    SqliteDatabase,
    instant_or_none,
    timestamp,
)
from cleanair_storage.sqlite.rate_limits import HIT_UPSERT


def _windows_read(pool: int) -> str:
    """A pool's four window counters as scalar subqueries (NULL: nothing counted yet), the
    pool being parameter `?pool` and the windows the four after it."""
    return ", ".join(
        f"(SELECT used FROM credit_windows WHERE pool = ?{pool} AND window = ?{pool + n})"  # noqa: S608
        for n in range(1, 5)
    )


#: A pool's four window counters as one row, as the admission reads them: every debit
#: checks them first. An `IN` list gave a row per window, which cost a dict and four lookups
#: more, about 7 of its 13 µs.
_USAGE = "SELECT " + _windows_read(1)
#: A charge's rate-limit hit (?1-?3, `HIT_UPSERT`) and its pool's windows (?4-?8), one
#: statement: the windows are not the hit's table, so they read as they would just after it.
_HIT_AND_USAGE = HIT_UPSERT + "RETURNING count, " + _windows_read(4)
#: A debit or a refund counted in its month's and its day's window, one statement for both.
_ADD_TO_WINDOWS = (
    "INSERT INTO credit_windows (pool, window, used) VALUES (?1, ?2, ?4), (?1, ?3, ?4) "
    "ON CONFLICT (pool, window) DO UPDATE SET used = used + excluded.used"
)


def _window_keys_at(at: datetime) -> tuple[str, str, str, str]:
    """The keys of the month's, the day's, the month's grant and the day's grant windows."""
    month, day = windows_at(at)
    return month, day, grant_window(month_key(at)), day_grant_window(day_key(at))


class SqliteLedger(SqliteDatabase):
    """The credit ledger: debits checked against the pool's windows, refunds as reversing
    entries, and charge holds."""

    @staticmethod
    def _usage(conn: sqlite3.Connection, pool: str, at: datetime) -> Usage:
        row = conn.execute(_USAGE, (pool, *_window_keys_at(at))).fetchone()
        return Usage(row[0] or 0, row[1] or 0, row[2] or 0, row[3] or 0)

    @staticmethod
    def _hit_and_usage(
        conn: sqlite3.Connection, hit: RateHit, pool: str, at: datetime
    ) -> tuple[int, Usage]:
        """Count `hit` (as `count_hit`) and read `pool`'s usage at `at`, in one statement."""
        row = conn.execute(
            _HIT_AND_USAGE,
            (hit.key, hit.window_start, hit.window_seconds, pool, *_window_keys_at(at)),
        ).fetchone()
        return int(row[0]), Usage(row[1] or 0, row[2] or 0, row[3] or 0, row[4] or 0)

    @staticmethod
    def _append(
        conn: sqlite3.Connection,
        pool: str,
        connection_id: str,
        label: str,
        amount: int,
        at: datetime,
        month: str,
        day: str,
        reverses: int | None,
    ) -> LedgerEntry:
        # The new row's id is the connection's last inserted rowid (this thread holds the
        # writer): RETURNING built a result table for it, a third of the insert's cost.
        entry_id = conn.execute(
            "INSERT INTO ledger (pool, connection_id, label, amount, at, month, day, reverses) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (pool, connection_id, label, amount, timestamp(at), month, day, reverses),
        ).lastrowid
        if entry_id is None:  # set by every INSERT that added a row
            raise RuntimeError("SQLite gave the new ledger row no id")
        conn.execute(_ADD_TO_WINDOWS, (pool, *window_keys(month, day), amount))
        return LedgerEntry(entry_id, pool, connection_id, label, amount, at, month, day, reverses)

    @classmethod
    def _debit(
        cls,
        conn: sqlite3.Connection,
        debit: Debit,
        limits: CreditLimits,
        usage: Usage | None = None,
    ) -> LedgerEntry:
        """Check and append `debit`; the caller holds the write transaction (and may have read
        the pool's `usage` in it already)."""
        if usage is None:
            usage = cls._usage(conn, debit.pool, debit.at)
        check_fits(usage, debit.amount, limits, debit.at)
        entry = cls._append(
            conn,
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
            conn.execute(
                "INSERT INTO charge_holds (entry_id, until) VALUES (?, ?)",
                (entry.id, timestamp(debit.hold_until)),
            )
        return entry

    @classmethod
    def _refund(cls, conn: sqlite3.Connection, entry_id: int, at: datetime) -> LedgerEntry | None:
        """Reverse debit `entry_id` unless already reversed; the caller holds the write
        transaction."""
        original = conn.execute(
            "SELECT pool, connection_id, label, amount, month, day FROM ledger "
            "WHERE id = ? AND reverses IS NULL AND reason IS NULL "
            "AND NOT EXISTS (SELECT 1 FROM ledger r WHERE r.reverses = ledger.id)",
            (entry_id,),
        ).fetchone()
        if original is None:
            return None
        conn.execute("DELETE FROM charge_holds WHERE entry_id = ?", (entry_id,))
        pool, connection_id, label, amount, month, day = original
        return cls._append(conn, pool, connection_id, label, -amount, at, month, day, entry_id)

    def debit(self, debit: Debit, limits: CreditLimits) -> LedgerEntry:
        with self._write() as conn:
            return self._debit(conn, debit, limits)

    def settle_charges(
        self, charges: Sequence[FinalCharge], limits: CreditLimits
    ) -> list[Settlement]:
        settled: list[Settlement] = []
        # One BEGIN IMMEDIATE and one COMMIT for the whole batch: a commit is most of a
        # write's cost, and the batch's requests are answered only once it is done.
        with self._write() as conn:
            for charge in charges:
                hit, debit = charge.hit, charge.debit
                usage = None
                if hit is not None:
                    count, usage = self._hit_and_usage(conn, hit, debit.pool, debit.at)
                    if count > hit.limit:
                        settled.append(OverRateLimit())
                        continue
                try:
                    settled.append(self._debit(conn, debit, limits, usage))
                except CreditsExhausted as exc:  # checked before anything was written
                    settled.append(exc)
        return settled

    def refund(self, entry_id: int, at: datetime) -> LedgerEntry | None:
        with self._write() as conn:
            return self._refund(conn, entry_id, at)

    def confirm_charge(self, entry_id: int) -> bool:
        # One statement, atomic without BEGIN IMMEDIATE (as `hit`): this runs on every charged
        # call, and the explicit transaction would double its cost.
        with self._autocommit() as conn:
            cur = conn.execute("DELETE FROM charge_holds WHERE entry_id = ?", (entry_id,))
            return cur.rowcount == 1

    def renew_holds(self, entry_ids: Sequence[int], until: datetime) -> int:
        renewed = 0
        with self._write() as conn:
            for start in range(0, len(entry_ids), LOOKUP_CHUNK):
                chunk = list(entry_ids[start : start + LOOKUP_CHUNK])
                marks = ", ".join("?" * len(chunk))
                cur = conn.execute(
                    f"UPDATE charge_holds SET until = ? WHERE entry_id IN ({marks})",  # noqa: S608
                    [timestamp(until), *chunk],
                )
                renewed += cur.rowcount
        return renewed

    def sweep_holds(self, now: datetime, plan_error: str) -> int:
        with self._write() as conn:
            ended = [
                row[0]
                for row in conn.execute(
                    "SELECT entry_id FROM charge_holds WHERE until <= ? ORDER BY entry_id",
                    (timestamp(now),),
                ).fetchall()
            ]
            for entry_id in ended:
                self._refund(conn, entry_id, now)
                conn.execute(
                    f"{FAIL_PENDING_PLAN} WHERE ledger_entry = ? AND status = 'pending'",
                    (plan_error, timestamp(now), entry_id),
                )
            return len(ended)

    def grant(
        self, pool: str, amount: int, reason: str, at: datetime, *, day_only: bool = False
    ) -> LedgerEntry:
        month, day = month_key(at), day_key(at)
        label, window = grant_counted_in(at, day_only=day_only)
        with self._write() as conn:
            row = conn.execute(
                "INSERT INTO ledger (pool, connection_id, label, amount, at, month, day, reason) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (pool, GRANT_CONNECTION, label, amount, timestamp(at), month, day, reason),
            ).fetchone()
            conn.execute(
                "INSERT INTO credit_windows (pool, window, used) VALUES (?, ?, ?) "
                "ON CONFLICT (pool, window) DO UPDATE SET used = used + excluded.used",
                (pool, window, amount),
            )
        return LedgerEntry(
            row[0], pool, GRANT_CONNECTION, label, amount, at, month, day, reason=reason
        )

    def usage(self, pool: str, at: datetime) -> Usage:
        return self._usage(self._read(), pool, at)

    def usage_by_label(self, pool: str, month: str) -> dict[str, int]:
        rows = (
            self._read()
            .execute(
                "SELECT label, SUM(amount) FROM ledger "
                "WHERE pool = ? AND month = ? AND reason IS NULL GROUP BY label",
                (pool, month),
            )
            .fetchall()
        )
        return {str(label): int(total) for label, total in rows}

    def entries(self, pool: str) -> list[LedgerEntry]:
        rows = (
            self._read()
            .execute(
                "SELECT id, pool, connection_id, label, amount, at, month, day, reverses, reason "
                "FROM ledger WHERE pool = ? ORDER BY id",
                (pool,),
            )
            .fetchall()
        )
        return [
            LedgerEntry(r[0], r[1], r[2], r[3], r[4], instant_or_none(r[5]), r[6], r[7], r[8], r[9])  # type: ignore[arg-type]
            for r in rows
        ]
