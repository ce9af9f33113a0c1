"""Framework-free core of cleanair: the rules of the API contract, its ports and use cases."""

from cleanair_core.charging import Charge
from cleanair_core.clock import Clock, ManualClock, SystemClock
from cleanair_core.credits import Billable, CreditLimits, Quota
from cleanair_core.scopes import Scope
from cleanair_core.service import CleanAir, Policy
from cleanair_core.tokens import Environment, TokenKeys, generate_key

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
