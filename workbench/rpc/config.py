"""``RPCConfig``: TVM's tracker configuration, mapped onto a Dask cluster.

TVM's fields keep their names and order, so TVM code ports; what they mean here:

- ``tracker_host`` / ``tracker_port``: the Dask scheduler. ``tracker_host`` may be a full
  address (``"tcp://host:8786"``, ``"tls://..."``, ``"local"`` for the in-process cluster,
  or a ``distributed.Client``); a bare host takes ``tracker_port`` (default 8786, Dask's).
  Missing: the option ``rpc_address`` (``WORKBENCH_RPC_ADDRESS``), else a ``ValueError``.
- ``tracker_key``: the Dask worker resource that selects the workers (TVM's device key);
  missing: the option ``rpc_key`` (``WORKBENCH_RPC_KEY``), else any worker.
- ``session_priority``: the Dask priority of the measurement tasks (higher runs first).
- ``session_timeout_sec``: a session's lifetime for ``connect_server``, and for the "rpc"
  runner the time one candidate may take on a worker (load, output check, timing), as TVM's
  server-side session timeout.
- ``security`` (Workbench): a ``distributed.Security`` passed to Dask as is (TLS).
"""
from __future__ import annotations

from typing import Any, NamedTuple

from workbench import options

__all__ = ["RPCConfig", "DEFAULT_SCHEDULER_PORT"]

DEFAULT_SCHEDULER_PORT = 8786

options.register("rpc_address", str, "", env="WORKBENCH_RPC_ADDRESS",
                 doc="Default Dask scheduler for RPCConfig / runner='rpc' ('tcp://host:8786', "
                     "or 'local' for an in-process cluster).")
options.register("rpc_key", str, "", env="WORKBENCH_RPC_KEY",
                 doc="Default worker key (Dask worker resource) for RPCConfig / runner='rpc'; "
                     "empty selects every worker.")


class RPCConfig(NamedTuple):
    """Where remote sessions and measurements go (module docstring)."""

    tracker_host: Any = None
    tracker_port: int | str | None = None
    tracker_key: str | None = None
    session_priority: int = 1
    session_timeout_sec: float = 10
    security: Any = None

    def _normalized(self) -> "RPCConfig":
        """Fill missing fields from the options; check the values (errors name the field)."""
        host, port, key = self.tracker_host, self.tracker_port, self.tracker_key
        if host is None or host == "":
            host = options.get("rpc_address") or None
        if host is None:
            raise ValueError("RPCConfig: tracker_host is not set: give the Dask scheduler "
                             "(tracker_host='tcp://host:8786', or 'local' for an in-process "
                             "cluster) or set the environment variable WORKBENCH_RPC_ADDRESS")
        if key is None or key == "":
            key = options.get("rpc_key") or None
        if isinstance(port, str):
            try:
                port = int(port)
            except ValueError:
                raise ValueError(f"RPCConfig: tracker_port must be an int, got "
                                 f"{self.tracker_port!r}") from None
        if port is not None and not 0 < port < 65536:
            raise ValueError(f"RPCConfig: tracker_port must be in 1..65535, got {port}")
        if isinstance(host, str) and ("://" in host or host == "local") and port is not None:
            raise ValueError(f"RPCConfig: tracker_host {host!r} is a full address; leave "
                             "tracker_port unset")
        if not isinstance(self.session_priority, int):
            raise ValueError(f"RPCConfig: session_priority must be an int, got "
                             f"{self.session_priority!r}")
        timeout = self.session_timeout_sec
        if timeout is None or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ValueError(f"RPCConfig: session_timeout_sec must be a number > 0, got "
                             f"{timeout!r}")
        return self._replace(tracker_host=host, tracker_port=port, tracker_key=key)

    @property
    def address(self) -> Any:
        """The scheduler address (or Client) this config points at."""
        cfg = self._normalized()
        host = cfg.tracker_host
        if not isinstance(host, str) or "://" in host or host == "local":
            return host
        return f"{host}:{cfg.tracker_port or DEFAULT_SCHEDULER_PORT}"

    def cluster(self, timeout: float = 30.0) -> Any:
        """The shared :class:`~workbench.rpc.cluster.Cluster` of this config."""
        from workbench.rpc.cluster import get_cluster

        return get_cluster(self.address, self.security, timeout)

    def connect_server(self) -> Any:
        """A :class:`~workbench.rpc.RemoteSession` on a worker offering the key, ending after
        ``session_timeout_sec`` (TVM's ``connect_server``)."""
        from workbench.rpc.session import connect

        cfg = self._normalized()
        return connect(self.address, cfg.tracker_key, session_timeout=cfg.session_timeout_sec,
                       security=cfg.security)

    def connect_tracker(self) -> Any:
        """The scheduler as TVM's ``TrackerSession`` (``request``, ``summary``)."""
        from workbench.rpc.session import TrackerSession

        return TrackerSession(self.cluster())

    def count_num_servers(self, allow_missing: bool = True) -> int:
        """How many workers offer the key; with ``allow_missing=False`` none is an error."""
        cfg = self._normalized()
        found = len(self.cluster().workers(cfg.tracker_key))
        if not found and not allow_missing:
            from workbench.rpc.base import NoMatchingWorker
            raise NoMatchingWorker(f"no worker of {self.address} offers key "
                                   f"{cfg.tracker_key!r}")
        return found
