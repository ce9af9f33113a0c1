"""`SqliteStore`: every storage port's SQLite module over one database file."""

from __future__ import annotations

from cleanair_storage.sqlite.access_points import SqliteAccessPoints
from cleanair_storage.sqlite.accounts import SqliteAccounts
from cleanair_storage.sqlite.admission import SqliteAdmission
from cleanair_storage.sqlite.alert_outbox import SqliteAlertOutbox
from cleanair_storage.sqlite.client_labels import SqliteClientLabels
from cleanair_storage.sqlite.database import port_errors
from cleanair_storage.sqlite.evaluation_claims import SqliteEvaluationClaims
from cleanair_storage.sqlite.networks import SqliteStreetNetworks
from cleanair_storage.sqlite.observations import SqliteObservations
from cleanair_storage.sqlite.pairing import SqlitePairingCodes
from cleanair_storage.sqlite.plans import SqlitePlans
from cleanair_storage.sqlite.rate_limits import SqliteRateLimits
from cleanair_storage.sqlite.subscriptions import SqliteSubscriptions


@port_errors
class SqliteStore(
    SqliteAdmission,  # and, through it, the connections
    SqliteAccounts,
    SqlitePairingCodes,
    SqlitePlans,  # and, through it, the credit ledger its transactions share
    SqliteRateLimits,
    SqliteClientLabels,
    SqliteAccessPoints,
    SqliteObservations,
    SqliteStreetNetworks,
    SqliteSubscriptions,
    SqliteEvaluationClaims,
    SqliteAlertOutbox,
):
    """Implements `cleanair_core.ports.Store` over one SQLite file."""
