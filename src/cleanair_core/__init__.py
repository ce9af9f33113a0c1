"""Framework-free core of cleanair: the rules of the API contract, its ports and use cases."""

from cleanair_core.access.scopes import Scope
from cleanair_core.access.tokens import Environment
from cleanair_core.clock import Clock, ManualClock, SystemClock
from cleanair_core.credits.charging import Charge
from cleanair_core.credits.ledger import Billable, CreditLimits, Quota
from cleanair_core.keys import TokenKeys, generate_key
from cleanair_core.policy import Policy
from cleanair_core.service import CleanAir

__all__ = [
    "Billable",
    "Charge",
    "CleanAir",
    "Clock",
    "CreditLimits",
    "Environment",
    "ManualClock",
    "Policy",
    "Quota",
    "Scope",
    "SystemClock",
    "TokenKeys",
    "generate_key",
]
