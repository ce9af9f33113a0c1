"""What every process derives from a street network at load, as arrays for a shared file.

The composition root hands `derive` and `DERIVATION` to `cleanair_storage.network_files`:
the router's arcs and snapping index (`street_router.router_arrays`) and the street level's
increment raster (`street_increments.increment_arrays`), each named with its adapter's prefix.
"""

from __future__ import annotations

from typing import Any

import numpy.typing as npt

from cleanair_core.routes.network import StreetNetwork
from cleanair_sources import street_increments, street_router

#: The version of what `derive` gives: a new one makes every machine write new files.
DERIVATION = f"{street_router.DERIVATION}+{street_increments.DERIVATION}"


def derive(network: StreetNetwork) -> dict[str, npt.NDArray[Any]]:
    """Every array the adapters derive from `network` at load, built now."""
    arrays = street_router.router_arrays(network) if network.edge_count else {}
    arrays.update(street_increments.increment_arrays(network))
    return arrays
