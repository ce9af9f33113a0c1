"""Street-network arrays as stored bytes: raw little-endian, the same on any machine."""

from __future__ import annotations

import numpy as np

#: Each StreetNetwork array and its element type; stored as raw little-endian bytes, so a
#: database file reads the same on any machine.
NETWORK_ARRAYS: tuple[tuple[str, type[np.generic]], ...] = (
    ("node_lat", np.float64),
    ("node_lon", np.float64),
    ("edge_from", np.int32),
    ("edge_to", np.int32),
    ("edge_length", np.float64),
    ("edge_class", np.uint8),
    ("edge_access", np.uint8),
    ("edge_traffic", np.float64),
)


def array_bytes(name: str, array: np.ndarray, kind: type[np.generic]) -> bytes:
    native = np.dtype(kind)
    if array.ndim != 1 or array.dtype.newbyteorder("=") != native:
        raise ValueError(
            f"{name} must be a one-dimensional {native.name} array, "
            f"not {array.dtype} of shape {array.shape}"
        )
    return array.astype(native.newbyteorder("<"), copy=False).tobytes()


def array_of(blob: bytes, kind: type[np.generic]) -> np.ndarray:
    # A native, writable copy: numpy can work on it in place, and the blob can be freed.
    native = np.dtype(kind)
    return np.frombuffer(blob, dtype=native.newbyteorder("<")).astype(native)
