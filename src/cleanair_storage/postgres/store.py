"""`PostgresStore`: every storage port's PostgreSQL module over one database."""

from __future__ import annotations

from cleanair_storage.postgres.access_points import PostgresAccessPoints
from cleanair_storage.postgres.accounts import PostgresAccounts
from cleanair_storage.postgres.admission import PostgresAdmission
from cleanair_storage.postgres.alert_outbox import PostgresAlertOutbox
from cleanair_storage.postgres.client_labels import PostgresClientLabels
from cleanair_storage.postgres.database import port_errors
from cleanair_storage.postgres.evaluation_claims import PostgresEvaluationClaims
from cleanair_storage.postgres.networks import PostgresStreetNetworks
from cleanair_storage.postgres.observations import PostgresObservations
from cleanair_storage.postgres.pairing import PostgresPairingCodes
from cleanair_storage.postgres.plans import PostgresPlans
from cleanair_storage.postgres.rate_limits import PostgresRateLimits
from cleanair_storage.postgres.subscriptions import PostgresSubscriptions


@port_errors
class PostgresStore(
    PostgresAdmission,  # and, through it, the connections
    PostgresAccounts,
    PostgresPairingCodes,
    PostgresPlans,  # and, through it, the credit ledger its transactions share
    PostgresRateLimits,
    PostgresClientLabels,
    PostgresAccessPoints,
    PostgresObservations,
    PostgresStreetNetworks,
    PostgresSubscriptions,
    PostgresEvaluationClaims,
    PostgresAlertOutbox,
):
    """Implements `cleanair_core.ports.Store` over one PostgreSQL database."""
