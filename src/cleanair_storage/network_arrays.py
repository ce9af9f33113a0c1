"""Street-network arrays as stored bytes: raw little-endian, the same on any machine."""

from __future__ import annotations

from typing import TYPE_CHECKING

# NumPy is imported by the functions that convert: the operator CLI opens the store and
# starts faster without NumPy.
if TYPE_CHECKING:
    import numpy as np

    from cleanair_core.routes.network import NetworkAreas, StreetNetwork

#: Each StreetNetwork array and its element type (a NumPy dtype name); stored as raw
#: little-endian bytes, so a database file reads the same on any machine.
NETWORK_ARRAYS: tuple[tuple[str, str], ...] = (
    ("node_lat", "float64"),
    ("node_lon", "float64"),
    ("edge_from", "int32"),
    ("edge_to", "int32"),
    ("edge_length", "float64"),
    ("edge_class", "uint8"),
    ("edge_access", "uint8"),
    ("edge_traffic", "float64"),
    ("edge_name", "int32"),
)


#: The columns of a network's `areas` (`NetworkAreas`), each of its arrays and element type;
#: all NULL for a network without them.
AREA_ARRAYS: tuple[tuple[str, str, str], ...] = (
    ("area_kind", "kind", "uint8"),
    ("area_ring_end", "ring_end", "int32"),
    ("area_lat", "lat", "float64"),
    ("area_lon", "lon", "float64"),
)


def stored_areas(areas: NetworkAreas | None) -> list[bytes | None]:
    """Each of `AREA_ARRAYS` of `areas` as bytes; all None (NULL) without areas."""
    if areas is None:
        return [None] * len(AREA_ARRAYS)
    return [array_bytes(column, getattr(areas, field), kind) for column, field, kind in AREA_ARRAYS]


def areas_of(blobs: list[bytes | None]) -> NetworkAreas | None:
    """The areas `stored_areas` stored; None when NULL (stored before areas were kept)."""
    from cleanair_core.routes.network import NetworkAreas

    if any(blob is None for blob in blobs):
        return None
    arrays = {
        field: array_of(blob, kind)
        for (_, field, kind), blob in zip(AREA_ARRAYS, blobs, strict=True)
        if blob is not None
    }
    return NetworkAreas(**arrays)


def stored_arrays(network: StreetNetwork) -> list[bytes | None]:
    """Each of `NETWORK_ARRAYS` of `network` as bytes; None (NULL) for an absent optional one
    (`edge_name` of a network without street names)."""
    arrays: list[bytes | None] = []
    for name, kind in NETWORK_ARRAYS:
        array = getattr(network, name)
        arrays.append(None if array is None else array_bytes(name, array, kind))
    return arrays


def names_bytes(names: tuple[str, ...]) -> bytes:
    """Street names as stored: UTF-8, one per line (an import keeps no line breaks in a
    name, `cleanair_sources.osm_import`)."""
    if any("\n" in name for name in names):
        raise ValueError("a street name must not hold a line break")
    return "\n".join(names).encode()


def names_of(blob: bytes | None) -> tuple[str, ...]:
    """The names `names_bytes` stored; none for NULL (a network stored before names were)."""
    if not blob:
        return ()
    return tuple(blob.decode().split("\n"))


def array_bytes(name: str, array: np.ndarray, kind: str) -> bytes:
    import numpy as np

    native = np.dtype(kind)
    if array.ndim != 1 or array.dtype.newbyteorder("=") != native:
        raise ValueError(
            f"{name} must be a one-dimensional {native.name} array, "
            f"not {array.dtype} of shape {array.shape}"
        )
    return array.astype(native.newbyteorder("<"), copy=False).tobytes()


def array_of(blob: bytes, kind: str) -> np.ndarray:
    import numpy as np

    # A native, writable copy: numpy can work on it in place, and the blob can be freed.
    native = np.dtype(kind)
    return np.frombuffer(blob, dtype=native.newbyteorder("<")).astype(native)
