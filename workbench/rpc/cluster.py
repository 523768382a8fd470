"""Reaching a Dask cluster: one client per scheduler address, and the in-process one.

- :func:`get_cluster` returns the :class:`Cluster` for an address, made once per process and
  security setting and then shared (sessions, the "rpc" runner and the Dask builder of one
  notebook use one Dask client). Addresses: ``"tcp://host:8786"``, ``"tls://host:8786"``,
  ``"host:8786"`` (tcp, or tls with a ``security``), a ``distributed.Client`` (used as is),
  or None / ``"local"`` for the process's own in-process cluster.
- The in-process cluster is a ``distributed.LocalCluster(processes=False)``: scheduler and
  workers are threads of this process (option ``rpc_local_workers`` of them, one thread
  each), so it starts in a fraction of a second and never re-imports a script's
  ``__main__``; the work they are given still runs in child processes
  (:mod:`workbench.rpc.child`). Every worker of it is this machine, so a key selects all of
  them.
- A *key* selects workers by a Dask worker resource: ``dask worker ... --resources
  "workbench-x86-avx512=1"`` offers key ``"workbench-x86-avx512"`` (TVM's tracker key).
  Measurements take one unit of it, so a worker with ``=1`` measures one kernel at a time.

Security: ``security`` is a ``distributed.Security`` and is passed to the Dask client as is
(TLS certificates, ``require_encryption``). A Dask cluster runs whatever code its clients
send, and workbench sends it compiled kernels and Python jobs: connect only to clusters you
trust, and only let clients you trust connect to yours.
"""
from __future__ import annotations

import atexit
import contextlib
import logging
import threading
import time
from typing import Any, Iterator, NamedTuple

from workbench import options
from workbench.rpc.base import ClusterUnavailable, NoMatchingWorker, require_distributed

__all__ = ["Cluster", "WorkerInfo", "get_cluster", "shutdown", "normalize_address"]

LOCAL = "local"


options.register("rpc_local_workers", int, 2, env="WORKBENCH_RPC_LOCAL_WORKERS",
                 doc="Workers of the in-process Dask cluster (workbench.rpc.connect() with no "
                     "address).", validate=options.positive)


class WorkerInfo(NamedTuple):
    """A worker of the cluster: Dask address, name, host, resources, threads."""

    address: str
    name: str
    host: str
    resources: dict
    nthreads: int


def normalize_address(address: Any, security: Any = None) -> str:
    """The Dask address for ``address`` (module docstring); ``"local"`` for the in-process
    cluster."""
    if address is None or address == LOCAL:
        return LOCAL
    if not isinstance(address, str) or not address.strip():
        raise TypeError(f"a cluster address is a string like 'tcp://host:8786', got "
                        f"{address!r}")
    address = address.strip()
    if "://" not in address:
        scheme = "tls" if security is not None and getattr(security, "require_encryption",
                                                           False) else "tcp"
        address = f"{scheme}://{address}"
    return address


class Cluster:
    """A Dask client on one cluster, with the queries workbench needs."""

    def __init__(self, client: Any, address: str, local: Any = None) -> None:
        self.client = client
        self.address = address
        self._local = local  # the LocalCluster we started, if any

    @property
    def is_local(self) -> bool:
        """True for the in-process cluster (every worker is this machine)."""
        return self._local is not None

    @property
    def status(self) -> str:
        return str(getattr(self.client, "status", "unknown"))

    def workers(self, key: str | None = None) -> list[WorkerInfo]:
        """The workers now in the cluster that offer ``key`` (all of them for None, and on
        the in-process cluster), sorted by address."""
        self.check_running()
        try:
            info = self.client.scheduler_info()
        except Exception as err:  # noqa: BLE001 - comm errors of every kind
            raise ClusterUnavailable(f"cannot reach the Dask scheduler at {self.address}: "
                                     f"{err}") from err
        out = []
        for addr, w in sorted(info.get("workers", {}).items()):
            resources = dict(w.get("resources") or {})
            if key is not None and not self.is_local and resources.get(key, 0) <= 0:
                continue
            out.append(WorkerInfo(addr, str(w.get("name", addr)), str(w.get("host", "")),
                                  resources, int(w.get("nthreads", 1))))
        return out

    def wait_for_workers(self, key: str | None, timeout: float) -> list[WorkerInfo]:
        """The workers offering ``key``, waiting up to ``timeout`` seconds for a first one;
        :class:`NoMatchingWorker` names the resources the cluster does offer."""
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            found = self.workers(key)
            if found or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        if not found:
            offered = sorted({r for w in self.workers() for r in w.resources})
            what = f"offers key {key!r}" if key is not None else "is connected"
            raise NoMatchingWorker(
                f"no worker of the cluster at {self.address} {what} (waited {timeout:g} s); "
                f"the workers offer resources {offered or 'none'}. Start one with: dask worker "
                f"{self.address}" + (f" --resources \"{key}=1\"" if key else ""))
        return found

    def check_running(self) -> None:
        """Raise :class:`ClusterUnavailable` unless the client is connected."""
        if self.status != "running":
            raise ClusterUnavailable(f"the Dask scheduler at {self.address} is not reachable "
                                     f"(client status {self.status!r})")

    def wait_until_running(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a lost connection to come back."""
        deadline = time.monotonic() + max(0.0, timeout)
        while self.status != "running":
            if self.status in ("closed", "closing") or time.monotonic() >= deadline:
                return False
            time.sleep(0.2)
        return True

    def close(self) -> None:
        """Close the client (and the in-process cluster we started), quietly: with its
        scheduler gone, closing cancels Dask's reconnect loop, which logs the cancellation
        and the refused connection as an error with two tracebacks."""
        with _dask_client_logs_silenced():
            try:
                self.client.close()
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass
        if self._local is not None:
            try:
                self._local.close()
            except Exception:  # noqa: BLE001
                pass

    def __repr__(self) -> str:
        kind = "in-process" if self.is_local else self.address
        return f"<Cluster {kind} status={self.status}>"


@contextlib.contextmanager
def _dask_client_logs_silenced() -> Iterator[None]:
    """Drop what ``distributed.client`` logs in the block (only ever errors of a closing
    connection: what went wrong before reached the caller as exceptions)."""
    log = logging.getLogger("distributed.client")
    previous = log.disabled
    log.disabled = True
    try:
        yield
    finally:
        log.disabled = previous


class _ReconnectGaveUp(logging.Filter):
    """Dask's client, its scheduler gone for ``distributed.comm.timeouts.connect`` seconds,
    closes itself and logs that as an error; the session's next call raises
    ``ClusterUnavailable`` saying the same, so it becomes a line of ``workbench.rpc``'s
    info log."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("Failed to reconnect to scheduler"):
            return True
        logging.getLogger("workbench.rpc").info("Dask client: %s", record.getMessage())
        return False


_RECONNECT_FILTER = _ReconnectGaveUp()
_CLUSTERS: dict[tuple, Cluster] = {}
_LOCK = threading.Lock()


def get_cluster(address: Any = None, security: Any = None, timeout: float = 30.0) -> Cluster:
    """The shared :class:`Cluster` for ``address`` (module docstring); connects (or starts
    the in-process cluster) on first use. ``ClusterUnavailable`` if the scheduler cannot be
    reached within ``timeout`` seconds."""
    require_distributed()
    import distributed

    if isinstance(address, distributed.Client):
        key: tuple = ("client", id(address))
        with _LOCK:
            found = _CLUSTERS.get(key)
            if found is None or found.client is not address:
                found = _CLUSTERS[key] = Cluster(address, str(address.scheduler.address))
            return found
    address = normalize_address(address, security)
    key = (address, id(security) if security is not None else None)
    with _LOCK:
        found = _CLUSTERS.get(key)
        if found is not None and found.status not in ("closed", "closing"):
            return found
        found = _CLUSTERS[key] = _connect(address, security, timeout)
        return found


def _connect(address: str, security: Any, timeout: float) -> Cluster:
    import distributed

    logging.getLogger("distributed.client").addFilter(_RECONNECT_FILTER)  # once: a set

    if address == LOCAL:
        local = distributed.LocalCluster(
            n_workers=options.get("rpc_local_workers"), threads_per_worker=1,
            processes=False, dashboard_address=None, security=security,
            # no dashboard; its HTTP routes on a free port, not on Dask's usual 8787
            scheduler_kwargs={"dashboard_address": ":0"})
        client = distributed.Client(local, set_as_default=False, security=security)
        return Cluster(client, LOCAL, local=local)
    try:
        client = distributed.Client(address, security=security, timeout=timeout,
                                    set_as_default=False)
    except (OSError, TimeoutError) as err:
        raise ClusterUnavailable(f"cannot connect to the Dask scheduler at {address} within "
                                 f"{timeout:g} s: {err}") from err
    return Cluster(client, address)


def shutdown() -> None:
    """Close every client this process opened and stop the in-process cluster (also done at
    exit). Sessions on them end."""
    with _LOCK:
        clusters = [c for k, c in _CLUSTERS.items() if k[0] != "client"]
        _CLUSTERS.clear()
    for c in clusters:
        c.close()


atexit.register(shutdown)
