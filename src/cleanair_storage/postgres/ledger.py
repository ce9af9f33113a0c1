"""PostgreSQL: the credit ledger, its windows and charge holds (`CreditLedger`).

A debit takes a transaction-level advisory lock on its pool (a hash of the pool's name)
before it reads the pool's windows, so two debits of one pool, in any processes on any
machines, check and spend one after the other: no overspend. Debits of different pools do
not wait for each other. A refund locks the debit's ledger row first, so it is reversed at
most once however many refunds race (and the ledger's unique `reverses` backs that up).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from cleanair_core.credits.ledger import (
    CreditLimits,
    Debit,
    LedgerEntry,
    Usage,
    check_fits,
    day_key,
    month_key,
    window_keys,
    windows_at,
)
from cleanair_storage.postgres.database import FAIL_PENDING_PLAN, Connection, PostgresDatabase


class PostgresLedger(PostgresDatabase):
    """The credit ledger: debits checked against the pool's windows, refunds as reversing
    entries, and charge holds."""

    @staticmethod
    def _usage(conn: Connection, pool: str, at: datetime) -> Usage:
        month, day = windows_at(at)
        rows = conn.execute(
            'SELECT "window", used FROM credit_windows WHERE pool = %s AND "window" IN (%s, %s)',
            (pool, month, day),
        ).fetchall()
        used: dict[str, int] = {str(window): int(count) for window, count in rows}
        return Usage(month=used.get(month, 0), day=used.get(day, 0))

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
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (debit.pool,))
        check_fits(cls._usage(conn, debit.pool, debit.at), debit.amount, limits, debit.at)
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
                "INSERT INTO charge_holds (entry_id, until) VALUES (%s, %s)",
                (entry.id, debit.hold_until),
            )
        return entry

    @classmethod
    def _refund(cls, conn: Connection, entry_id: int, at: datetime) -> LedgerEntry | None:
        original = conn.execute(
            "SELECT pool, connection_id, label, amount, month, day FROM ledger "
            "WHERE id = %s AND reverses IS NULL FOR UPDATE",
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
        with self._conn() as conn:
            return self._debit(conn, debit, limits)

    def refund(self, entry_id: int, at: datetime) -> LedgerEntry | None:
        with self._conn() as conn:
            return self._refund(conn, entry_id, at)

    def confirm_charge(self, entry_id: int) -> bool:
        with self._conn() as conn:
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

    def usage(self, pool: str, at: datetime) -> Usage:
        with self._conn() as conn:
            return self._usage(conn, pool, at)

    def usage_by_label(self, pool: str, month: str) -> dict[str, int]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT label, sum(amount) FROM ledger WHERE pool = %s AND month = %s "
                "GROUP BY label",
                (pool, month),
            ).fetchall()
        return {str(label): int(total) for label, total in rows}

    def entries(self, pool: str) -> list[LedgerEntry]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT id, pool, connection_id, label, amount, at, month, day, reverses "
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
            )
            for r in rows
        ]
