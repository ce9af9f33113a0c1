"""PostgreSQL: pairing codes and the guess log (`PairingCodeStore`)."""

from __future__ import annotations

from datetime import datetime

from cleanair_core.access.pairing import (
    GUESS_WINDOW,
    GuessLog,
    PairingCode,
    check_guess,
    guess_time,
)
from cleanair_core.clock import Clock
from cleanair_storage.postgres.database import PostgresDatabase

#: The advisory lock of pairing: code issue and redemption take it, so guesses are counted
#: and timed in one order across every process ("pairing" in ASCII).
PAIRING_LOCK = 0x70616972696E67


class PostgresPairingCodes(PostgresDatabase):
    """Pairing codes and the guess log, each change in one transaction under the lock."""

    def add_pairing_code(self, code: PairingCode, now: datetime) -> bool:
        with self._conn() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (PAIRING_LOCK,))
            conn.execute("DELETE FROM pairing_codes WHERE expires_at <= %s", (now,))
            live = conn.execute(
                "SELECT 1 FROM pairing_codes WHERE code_hash = %s AND NOT used", (code.code_hash,)
            ).fetchone()
            if live is not None:
                return False
            conn.execute(
                'INSERT INTO pairing_codes (code_hash, "user", created_at, expires_at, used) '
                "VALUES (%s, %s, %s, %s, false) ON CONFLICT (code_hash) DO UPDATE SET "
                '"user" = EXCLUDED."user", created_at = EXCLUDED.created_at, '
                "expires_at = EXCLUDED.expires_at, used = false",
                (code.code_hash, code.user, code.created_at, code.expires_at),
            )
            return True

    def redeem_pairing_code(self, code_hash: str, clock: Clock, budget: int) -> str | None:
        with self._conn() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (PAIRING_LOCK,))
            # The time is read under the lock, so guesses are timed in lock order.
            newest_row = conn.execute("SELECT max(tried_at) FROM pairing_guesses").fetchone()
            now = guess_time(clock.now(), None if newest_row is None else newest_row[0])
            conn.execute("DELETE FROM pairing_guesses WHERE tried_at <= %s", (now - GUESS_WINDOW,))
            log = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM pairing_guesses WHERE code_hash = %s), "
                "count(*), min(tried_at) FROM pairing_guesses",
                (code_hash,),
            ).fetchone()
            assert log is not None  # an aggregate always answers one row
            check_guess(GuessLog(bool(log[0]), int(log[1]), log[2]), budget, now)
            conn.execute(
                "INSERT INTO pairing_guesses (code_hash, tried_at) VALUES (%s, %s) "
                "ON CONFLICT (code_hash) DO UPDATE SET tried_at = EXCLUDED.tried_at",
                (code_hash, now),
            )
            row = conn.execute(
                "UPDATE pairing_codes SET used = true "
                'WHERE code_hash = %s AND NOT used AND expires_at > %s RETURNING "user"',
                (code_hash, now),
            ).fetchone()
            return None if row is None else str(row[0])
