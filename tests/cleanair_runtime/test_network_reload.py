"""The network reloader on every store: it reloads when the stored networks change (an
import, a re-import under the same name, a deletion) and only then."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from cleanair_core.ports import Store
from cleanair_core.routes.network import StreetNetwork
from cleanair_http.offloading import in_thread
from cleanair_runtime.composition.network_reload import NetworkReloader
from cleanair_sources.street_increments import NetworkIncrements
from cleanair_sources.street_router import LoadedNetworks
from support.networks import grid


class Recorder:
    def __init__(self, store: Store) -> None:
        self.networks = LoadedNetworks()
        self.reloads: list[list[str]] = []
        self.reloader = NetworkReloader(
            store,
            self.networks.replace,
            NetworkIncrements,
            None,
            in_thread,
            started_with=[],
            interval=1,
            on_reload=self.reloaded,
        )

    def reloaded(self, networks: Sequence[StreetNetwork]) -> None:
        self.reloads.append(sorted(n.name for n in networks))

    def check(self) -> bool:
        return asyncio.run(self.reloader.check())


def test_it_reloads_when_the_stored_networks_change_and_only_then(store: Store) -> None:
    watched = Recorder(store)
    assert watched.check() is False  # nothing stored, nothing loaded

    store.save_network(grid(2, 2, name="north"))
    assert watched.check() is True
    assert watched.networks.names == ["north"]
    assert watched.check() is False  # the same networks: no second load

    store.save_network(grid(3, 3, name="north"))  # re-imported: another size
    assert watched.check() is True
    assert watched.networks.loaded[0].node_count == 9

    store.delete_network("north")
    assert watched.check() is True
    assert watched.networks.names == []
    assert watched.reloads == [["north"], ["north"], []]


def imported(network: StreetNetwork, at: datetime) -> StreetNetwork:
    return StreetNetwork(
        name=network.name,
        node_lat=network.node_lat,
        node_lon=network.node_lon,
        edge_from=network.edge_from,
        edge_to=network.edge_to,
        edge_length=network.edge_length,
        edge_class=network.edge_class,
        edge_access=network.edge_access,
        imported_at=at,
    )


def test_a_network_re_imported_at_another_time_is_reloaded(store: Store) -> None:
    network = grid(2, 2, name="north")
    store.save_network(imported(network, datetime(2026, 5, 1, tzinfo=UTC)))
    watched = Recorder(store)
    assert watched.check() is True

    store.save_network(imported(network, datetime(2026, 5, 2, tzinfo=UTC)))  # same data

    assert watched.check() is True
    assert watched.check() is False


def test_a_failed_check_keeps_what_is_loaded_and_tries_again(
    store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store.save_network(grid(2, 2, name="north"))
    watched = Recorder(store)
    watched.check()
    store.save_network(grid(2, 2, name="south"))

    def broken() -> list[StreetNetwork]:
        raise OSError("disk")

    monkeypatch.setattr(store, "load_networks", broken)
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) > 2:
            raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(watched.reloader.run(sleep))

    assert watched.networks.names == ["north"]
    assert sleeps == [1, 1, 1]
    failures = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(failures) == 2
    assert failures[0].__dict__["error"] == "builtins.OSError"
    monkeypatch.undo()
    assert watched.check() is True
    assert sorted(watched.networks.names) == ["north", "south"]
