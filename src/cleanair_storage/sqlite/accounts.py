"""SQLite: accounts: users and partners (`AccountStore`)."""

from __future__ import annotations

from cleanair_core.access.accounts import Partner, User
from cleanair_storage.sqlite.database import SqliteDatabase, instant, instant_or_none, timestamp


class SqliteAccounts(SqliteDatabase):
    """Users and partners."""

    def add_user(self, user: User) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "INSERT INTO users (name, premium, created_at) VALUES (?, ?, ?) "
                "ON CONFLICT (name) DO NOTHING",
                (user.name, int(user.premium), timestamp(user.created_at)),
            )
            return cur.rowcount == 1

    def get_user(self, name: str) -> User | None:
        row = (
            self._read()
            .execute("SELECT name, premium, created_at FROM users WHERE name = ?", (name,))
            .fetchone()
        )
        return None if row is None else User(row[0], bool(row[1]), instant_or_none(row[2]))  # type: ignore[arg-type]

    def list_users(self) -> list[User]:
        # BINARY collation: UTF-8 byte order, which is code point order.
        rows = self._read().execute("SELECT name, premium, created_at FROM users ORDER BY name")
        return [User(row[0], bool(row[1]), instant(row[2])) for row in rows]

    def set_premium(self, name: str, premium: bool) -> bool:
        with self._write() as conn:
            cur = conn.execute("UPDATE users SET premium = ? WHERE name = ?", (int(premium), name))
            return cur.rowcount == 1

    def add_partner(self, partner: Partner) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "INSERT INTO partners (name, active, created_at) VALUES (?, ?, ?) "
                "ON CONFLICT (name) DO NOTHING",
                (partner.name, int(partner.active), timestamp(partner.created_at)),
            )
            return cur.rowcount == 1

    def get_partner(self, name: str) -> Partner | None:
        row = (
            self._read()
            .execute("SELECT name, active, created_at FROM partners WHERE name = ?", (name,))
            .fetchone()
        )
        return None if row is None else Partner(row[0], bool(row[1]), instant_or_none(row[2]))  # type: ignore[arg-type]

    def list_partners(self) -> list[Partner]:
        rows = self._read().execute("SELECT name, active, created_at FROM partners ORDER BY name")
        return [Partner(row[0], bool(row[1]), instant(row[2])) for row in rows]

    def set_partner_active(self, name: str, active: bool) -> bool:
        with self._write() as conn:
            cur = conn.execute("UPDATE partners SET active = ? WHERE name = ?", (int(active), name))
            return cur.rowcount == 1
