"""PostgreSQL: accounts: users and partners (`AccountStore`)."""

from __future__ import annotations

from cleanair_core.access.accounts import Partner, User
from cleanair_storage.postgres.database import PostgresDatabase


class PostgresAccounts(PostgresDatabase):
    """Users and partners."""

    def add_user(self, user: User) -> bool:
        with self._conn() as conn:
            cur = conn.execute(
                "INSERT INTO users (name, premium, created_at) VALUES (%s, %s, %s) "
                "ON CONFLICT (name) DO NOTHING",
                (user.name, user.premium, user.created_at),
            )
            return cur.rowcount == 1

    def get_user(self, name: str) -> User | None:
        with self._statement() as conn:
            row = conn.execute(
                "SELECT name, premium, created_at FROM users WHERE name = %s", (name,)
            ).fetchone()
        return None if row is None else User(row[0], bool(row[1]), row[2])

    def list_users(self) -> list[User]:
        # COLLATE "C": code point order, as the other adapters, whatever the database's locale.
        with self._statement() as conn:
            rows = conn.execute(
                'SELECT name, premium, created_at FROM users ORDER BY name COLLATE "C"'
            ).fetchall()
        return [User(row[0], bool(row[1]), row[2]) for row in rows]

    def set_premium(self, name: str, premium: bool) -> bool:
        with self._conn() as conn:
            cur = conn.execute("UPDATE users SET premium = %s WHERE name = %s", (premium, name))
            return cur.rowcount == 1

    def add_partner(self, partner: Partner) -> bool:
        with self._conn() as conn:
            cur = conn.execute(
                "INSERT INTO partners (name, active, created_at) VALUES (%s, %s, %s) "
                "ON CONFLICT (name) DO NOTHING",
                (partner.name, partner.active, partner.created_at),
            )
            return cur.rowcount == 1

    def get_partner(self, name: str) -> Partner | None:
        with self._statement() as conn:
            row = conn.execute(
                "SELECT name, active, created_at FROM partners WHERE name = %s", (name,)
            ).fetchone()
        return None if row is None else Partner(row[0], bool(row[1]), row[2])

    def list_partners(self) -> list[Partner]:
        with self._statement() as conn:
            rows = conn.execute(
                'SELECT name, active, created_at FROM partners ORDER BY name COLLATE "C"'
            ).fetchall()
        return [Partner(row[0], bool(row[1]), row[2]) for row in rows]

    def set_partner_active(self, name: str, active: bool) -> bool:
        with self._conn() as conn:
            cur = conn.execute("UPDATE partners SET active = %s WHERE name = %s", (active, name))
            return cur.rowcount == 1
