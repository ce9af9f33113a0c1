"""Pairing codes: 6 digits from a CSPRNG, valid 60 s, single use, redeemed atomically.

Online guessing is bounded by a global guess budget: at most `budget` distinct codes may be
tried within any 60 s, whatever the number of client addresses. A code lives 60 s, so every
code faces at most `budget` distinct guesses in its whole life, and the odds of guessing it
are at most budget / 10**6 (1e-4 at the default 100). Trying a code already tried in that
window spends nothing, so honest retries never lock anyone out. When an attacker has spent
the budget a new code waits (Retry-After) until the oldest guess in the log is 60 s old; an
attacker who keeps trying about `budget` codes a minute keeps new codes waiting, and 60 s
after they stop every redemption works again. Guesses are timed under the store's lock, in
the order they are admitted (`guess_time`). The arithmetic is in docs/security.md.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol

import attrs

from cleanair_core.access.accounts import AccountStore, User
from cleanair_core.clock import Clock
from cleanair_core.errors import InvalidPairingCode, RateLimited
from cleanair_core.keys import TokenKeys

PAIRING_CODE_TTL = timedelta(seconds=60)
CODE_DIGITS = 6
#: The guess budget counts codes tried within one code life: every live code sees them all.
GUESS_WINDOW = PAIRING_CODE_TTL


@attrs.frozen
class PairingCode:
    """A stored pairing code; only the keyed hash of the digits is kept."""

    code_hash: str
    user: str
    created_at: datetime
    expires_at: datetime


def new_code(randbelow: Callable[[int], int] = secrets.randbelow) -> str:
    """Six decimal digits, uniformly drawn (leading zeros kept)."""
    return f"{randbelow(10**CODE_DIGITS):0{CODE_DIGITS}d}"


def is_well_formed(code: str) -> bool:
    """Six ASCII digits: anything else can match no code and costs no guess."""
    return len(code) == CODE_DIGITS and code.isascii() and code.isdigit()


@attrs.frozen
class GuessLog:
    """The distinct codes tried in the guess window ending now, as a store sees them."""

    #: Whether the code being tried is among them (a retry: it spends nothing).
    known: bool
    #: How many distinct codes were tried in the window.
    tried: int
    #: When the longest-unretried of them was last tried (None when there are none).
    oldest: datetime | None


def guess_time(clock_now: datetime, newest: datetime | None) -> datetime:
    """The time a guess is tried at: the clock, read once the store is locked, but never
    before the newest guess in the log. Guesses are then timed in the order they are
    admitted, whatever process or clock they come from; a stale time could otherwise let a
    guess be admitted into a window the log has already moved past, and be checked against
    a code that, by then, had faced the whole budget."""
    return clock_now if newest is None or newest <= clock_now else newest


def check_guess(log: GuessLog, budget: int, now: datetime) -> None:
    """Admit a code to be tried, or raise RateLimited until the budget frees a place.

    A known code is always admitted: trying it again tells an attacker nothing new about
    any live code. A new one needs a free place; the next place frees when the oldest guess
    leaves the window, which is the Retry-After.
    """
    if log.known or log.tried < budget:
        return
    if log.oldest is None:  # a budget below 1 is refused by Policy; be safe anyway
        raise RateLimited(math.ceil(GUESS_WINDOW.total_seconds()))
    reset = log.oldest + GUESS_WINDOW
    raise RateLimited(max(1, math.ceil((reset - now).total_seconds())))


class PairingCodeStore(Protocol):
    """Storage port for pairing codes and the guess log."""

    def add_pairing_code(self, code: PairingCode, now: datetime) -> bool:
        """Insert; False when a live code with the same hash exists (the caller draws again).

        Dead codes with the same hash are replaced; adapters may prune expired codes here.
        """

    def redeem_pairing_code(self, code_hash: str, clock: Clock, budget: int) -> str | None:
        """Try a code, as one atomic step across every process sharing the store.

        Under the store's lock: take the time with `guess_time` (the clock, never before the
        newest guess), forget guesses last tried `GUESS_WINDOW` or longer before it, decide
        with `check_guess` (which may raise RateLimited, and then nothing changes), record
        `code_hash` as tried (refreshing a known one), and mark a code with that hash used
        if it is live at that time. Returns its user, or None when nothing was redeemed. Of
        two concurrent redemptions of one code exactly one gets the user.
        """


def issue_code(
    user: User,
    *,
    codes: PairingCodeStore,
    keys: TokenKeys,
    now: datetime,
    randbelow: Callable[[int], int] = secrets.randbelow,
) -> str:
    """Store a fresh code for `user` (premium checked by the caller); the digits to show."""
    while True:  # a live code with the same digits is astronomically rare; draw again
        code = new_code(randbelow)
        stored = PairingCode(keys.hash_pairing_code(code), user.name, now, now + PAIRING_CODE_TTL)
        if codes.add_pairing_code(stored, now):
            return code


def redeem(
    code: str,
    *,
    codes: PairingCodeStore,
    accounts: AccountStore,
    keys: TokenKeys,
    clock: Clock,
    budget: int,
) -> User | None:
    """The premium user a code pairs with, the code now spent; None when it pairs with none.

    A malformed code spends no guess (InvalidPairingCode at once); a well-formed one is tried
    under the guess budget (RateLimited when spent). Every other failure is None, which the
    caller turns into one InvalidPairingCode, so an attacker learns nothing about why:
    unknown, expired, used, or its user no longer premium. None rather than an exception
    because the caller redeems inside a transaction: an exception would roll back the guess
    just recorded, and a wrong code would cost an attacker nothing.
    """
    if not is_well_formed(code):
        raise InvalidPairingCode()
    user_name = codes.redeem_pairing_code(keys.hash_pairing_code(code), clock, budget)
    user = accounts.get_user(user_name) if user_name is not None else None
    if user is None or not user.premium:
        return None
    return user
