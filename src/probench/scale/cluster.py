"""Connect to a Ray cluster, or start a local one, and leave nothing behind.

- ``--ray ADDRESS``: that cluster (``ray start --head`` prints it; a KubeRay head service;
  ``auto`` for the one ``ray start`` runs on this machine; ``ray://`` for Ray Client).
- ``--ray`` alone: ``RAY_ADDRESS`` if set, else a local cluster on this machine, bound to
  loopback (127.0.0.1: no port is opened to the network), without the dashboard, shut
  down when the command ends.

An address is given up on after ``timeout_s`` (``--ray-timeout``, default
:data:`CONNECT_TIMEOUT_S`) with one line, "no Ray cluster at ADDRESS": at once when nothing
listens there (a TCP probe of its port before Ray is asked), after the timeout when the
host does not answer or something that is not a Ray head listens (Ray's own connection
attempts retry for minutes, in C++ code no Python signal interrupts: past the timeout a
watchdog ends the process with that line and exit code 1).

Usage statistics are never sent (``RAY_USAGE_STATS_ENABLED=0``). The workers get the
driver's offline switches and Hugging Face cache location (:data:`FORWARDED_ENV`), so a
worker never downloads and finds the same weights where the cache is shared.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, TypedDict

from probench.scale.errors import RayClusterError, RayUsageError

# Passed to every worker when set in the driver's environment.
FORWARDED_ENV = (
    "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "YOLO_OFFLINE", "HF_HOME", "HF_HUB_CACHE",
    "YOLO_CONFIG_DIR", "TORCH_HOME", "PROBENCH_ENGINE_CACHE",
)  # fmt: skip
LOOPBACK = "127.0.0.1"
CONNECT_TIMEOUT_S = 30.0  # --ray-timeout's default: how long an address may take to answer
MAX_CONNECT_TIMEOUT_S = 60.0


class RayNode(TypedDict):
    """An alive node of the cluster, as a command reports it."""

    id: str
    ip: str
    cpus: float
    gpus: float


@dataclass
class Cluster:
    """The cluster a command runs on."""

    address: str  # what was asked ("local" for a cluster started here)
    local: bool  # started by this process (and shut down by it)
    gcs_address: str = ""
    nodes: list[RayNode] = field(default_factory=list)  # the alive nodes

    @property
    def cpus(self) -> float:
        return sum(n["cpus"] for n in self.nodes)

    @property
    def gpus(self) -> float:
        return sum(n["gpus"] for n in self.nodes)

    def describe(self) -> str:
        kind = "local cluster" if self.local else f"cluster {self.address}"
        return (f"{kind}: {len(self.nodes)} node(s) ({', '.join(n['ip'] for n in self.nodes)}), "
                f"{self.cpus:g} CPU, {self.gpus:g} GPU")  # fmt: skip

    def record(self) -> dict[str, object]:
        return {"address": self.address, "local": self.local, "nodes": [n["ip"] for n in self.nodes],
                "cpus": self.cpus, "gpus": self.gpus}  # fmt: skip


def import_ray() -> ModuleType:
    """The ``ray`` module, imported with usage statistics off and, for a local cluster, the
    node address on loopback (Ray reads both when it is imported or started)."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    try:
        import ray
    except ImportError as exc:
        raise RayUsageError(f"--ray needs the ray package ({exc}): `pip install ray`") from exc
    module: ModuleType = ray
    return module


@contextmanager
def _node_ip_on_loopback() -> Iterator[None]:
    """Ray picks this node's IP by routing towards the internet (and turns "127.0.0.1" into
    that IP) unless multi-host clusters are switched off (the switch Ray itself uses on
    macOS/Windows); with it off, a local cluster advertises and binds 127.0.0.1 only. Only
    for a cluster on loopback: a driver joining a remote cluster must advertise an address
    the workers can reach."""
    constants = sys.modules.get("ray._private.ray_constants")  # imported with ray
    before = getattr(constants, "ENABLE_RAY_CLUSTER", None)
    if constants is not None:
        setattr(constants, "ENABLE_RAY_CLUSTER", False)  # noqa: B010 - a module attribute, read at call time
    try:
        yield
    finally:
        if constants is not None:
            setattr(constants, "ENABLE_RAY_CLUSTER", before)  # noqa: B010


def on_loopback(address: str) -> bool:
    """Whether ``address`` (host:port, ``ray://host:port``) names this machine's loopback."""
    host = address.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
    return host in ("127.0.0.1", "localhost", "::1")


def resolve_address(address: str | None) -> str | None:
    """The address to connect to: ``address``, else ``RAY_ADDRESS``, else None (start a
    local cluster)."""
    if address:
        return address
    return os.environ.get("RAY_ADDRESS") or None


def _host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of ``HOST:PORT`` or ``ray://HOST:PORT``; None for ``auto``."""
    host, sep, port = address.split("://", 1)[-1].rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]") or LOOPBACK, int(port)


def _no_cluster(address: str, reason: str) -> RayClusterError:
    return RayClusterError(
        f"no Ray cluster at {address} ({reason}); start one there with `ray start --head`, or check the "
        "address (docs/SCALE.md)"
    )


def probe(address: str, timeout_s: float) -> None:
    """:class:`RayClusterError` "no Ray cluster at ADDRESS" unless something accepts a TCP
    connection at the address's port within ``timeout_s`` (nothing to probe for ``auto``)."""
    target = _host_port(address)
    if target is None:
        return
    try:
        with socket.create_connection(target, timeout=timeout_s):
            pass
    except TimeoutError:
        raise _no_cluster(address, f"no answer within {timeout_s:g} s") from None
    except ConnectionRefusedError:
        raise _no_cluster(address, "nothing listens there") from None
    except OSError as exc:
        raise _no_cluster(address, exc.strerror or type(exc).__name__) from None


def _watchdog(address: str, timeout_s: float) -> threading.Event:
    """Set the returned event once connected; if that takes longer than ``timeout_s``, the
    process ends with one line (exit 1): Ray's connection loop cannot be interrupted."""
    connected = threading.Event()

    def watch() -> None:
        if not connected.wait(timeout_s):
            error = _no_cluster(address, f"it did not answer as a Ray head within {timeout_s:g} s")
            sys.stderr.write(f"probench: error: {error}\n")
            sys.stderr.flush()
            os._exit(error.exit_code)

    threading.Thread(target=watch, name="probench-ray-connect", daemon=True).start()
    return connected


def _nodes(ray: ModuleType) -> list[RayNode]:
    out: list[RayNode] = []
    for n in ray.nodes():
        if not n.get("Alive"):
            continue
        res = n.get("Resources") or {}
        out.append({"id": n["NodeID"], "ip": n.get("NodeManagerAddress", "?"),
                    "cpus": float(res.get("CPU", 0.0)), "gpus": float(res.get("GPU", 0.0))})  # fmt: skip
    return sorted(out, key=lambda n: n["ip"])


@contextmanager
def ray_cluster(
    address: str | None = None, *, num_cpus: int | None = None, timeout_s: float = CONNECT_TIMEOUT_S
) -> Iterator[Cluster]:
    """Connect (or start a local cluster) for the duration of the block; Ray is shut down
    afterwards (a local cluster's processes end with it). When this process is already
    connected (a test fixture, a sweep), that connection is used and left open. An address
    that does not answer within ``timeout_s`` is given up on (module doc)."""
    ray = import_ray()
    if ray.is_initialized():
        ctx = ray.get_runtime_context()
        yield Cluster(address="connected", local=False, gcs_address=ctx.gcs_address, nodes=_nodes(ray))
        return
    target = resolve_address(address)
    env = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
    kwargs: dict[str, Any] = {
        "include_dashboard": False, "log_to_driver": False, "logging_level": logging.WARNING,
        "runtime_env": {"env_vars": env} if env else None,
    }  # fmt: skip
    if target is not None:
        probe(target, timeout_s)
    connected = _watchdog(target, timeout_s) if target is not None else None
    try:
        if target is None:
            with _node_ip_on_loopback():
                ray.init(address="local", num_cpus=num_cpus, _node_ip_address=LOOPBACK, **kwargs)
        elif on_loopback(target):  # a cluster on loopback (another local one): join it there
            with _node_ip_on_loopback():
                ray.init(address=target, **kwargs)
        else:
            ray.init(address=target, **kwargs)
    except (ConnectionError, TimeoutError, RuntimeError, ValueError) as exc:
        ray.shutdown()
        where = f"--ray {target}" if target else "a local Ray cluster"
        raise RayClusterError(f"cannot connect to {where}: {type(exc).__name__}: {exc}".rstrip()) from exc
    finally:
        if connected is not None:
            connected.set()
    try:
        nodes = _nodes(ray)
        cluster = Cluster(address=target or "local", local=target is None,
                          gcs_address=ray.get_runtime_context().gcs_address, nodes=nodes)  # fmt: skip
        if cluster.local and any(n["ip"] != LOOPBACK for n in nodes):
            raise RayClusterError(
                f"the local Ray cluster came up on {[n['ip'] for n in nodes]}, not {LOOPBACK}; "
                "set RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 before ray is imported"
            )
        yield cluster
    finally:
        ray.shutdown()
