"""`cleanair network`: import and list the street networks plans are made on."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from cleanair_core.errors import OperatorError
from cleanair_core.routes.network import validate_network_name
from cleanair_core.service import CleanAir
from cleanair_runtime.cli.formatting import when
from cleanair_runtime.terminal import escape_nonprintable


def import_network_file(core: CleanAir, path: Path, name: str | None) -> None:
    """Read `path` with pyosmium and store the network; progress goes to stderr."""
    from cleanair_sources.osm_import import import_network

    if not path.is_file():
        raise OperatorError(f"no such file: {path}")
    name = validate_network_name(name or path.name.split(".")[0])
    started = time.monotonic()

    def progress(stage: str, count: int) -> None:
        print(f"cleanair: {escape_nonprintable(stage)}: {count:,}", file=sys.stderr, flush=True)

    network = import_network(path, name, progress, core.clock.now())
    core.save_network(network)
    print(
        f"imported network {escape_nonprintable(network.name)}: {network.node_count:,} nodes, "
        f"{network.edge_count:,} edges in {time.monotonic() - started:.1f} s"
    )


def list_networks(core: CleanAir) -> None:
    """The stored street networks as a table."""
    print("name\tnodes\tedges\tsouth,west,north,east\tsource\timported")
    for n in core.network_summaries():
        bounds = ",".join(f"{v:.5f}" for v in n.bounds)
        name, source = escape_nonprintable(n.name), escape_nonprintable(n.source)
        print(f"{name}\t{n.nodes}\t{n.edges}\t{bounds}\t{source}\t{when(n.imported_at)}")
