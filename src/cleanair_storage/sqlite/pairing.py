"""SQLite: pairing codes and the guess log (`PairingCodeStore`)."""

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
from cleanair_storage.sqlite.database import SqliteDatabase, instant_or_none, timestamp


class SqlitePairingCodes(SqliteDatabase):
    """Pairing codes and the guess log, redeemed in one write transaction."""

    def add_pairing_code(self, code: PairingCode, now: datetime) -> bool:
        with self._write() as conn:
            conn.execute("DELETE FROM pairing_codes WHERE expires_at <= ?", (timestamp(now),))
            live = conn.execute(
                "SELECT 1 FROM pairing_codes WHERE code_hash = ? AND used = 0", (code.code_hash,)
            ).fetchone()
            if live is not None:
                return False
            conn.execute(
                "INSERT OR REPLACE INTO pairing_codes "
                "(code_hash, user, created_at, expires_at, used) VALUES (?, ?, ?, ?, 0)",
                (code.code_hash, code.user, timestamp(code.created_at), timestamp(code.expires_at)),
            )
            return True

    def redeem_pairing_code(self, code_hash: str, clock: Clock, budget: int) -> str | None:
        with self._write() as conn:
            # The time is read under the write lock, so guesses are timed in lock order.
            (newest,) = conn.execute("SELECT MAX(tried_at) FROM pairing_guesses").fetchone()
            now = guess_time(clock.now(), instant_or_none(newest))
            conn.execute(
                "DELETE FROM pairing_guesses WHERE tried_at <= ?", (timestamp(now - GUESS_WINDOW),)
            )
            known, tried, oldest = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM pairing_guesses WHERE code_hash = ?), "
                "COUNT(*), MIN(tried_at) FROM pairing_guesses",
                (code_hash,),
            ).fetchone()
            check_guess(GuessLog(bool(known), tried, instant_or_none(oldest)), budget, now)
            conn.execute(
                "INSERT INTO pairing_guesses (code_hash, tried_at) VALUES (?, ?) "
                "ON CONFLICT (code_hash) DO UPDATE SET tried_at = excluded.tried_at",
                (code_hash, timestamp(now)),
            )
            row = conn.execute(
                "UPDATE pairing_codes SET used = 1 "
                "WHERE code_hash = ? AND used = 0 AND expires_at > ? RETURNING user",
                (code_hash, timestamp(now)),
            ).fetchone()
            return None if row is None else str(row[0])
