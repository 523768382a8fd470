"""Errors of remote sessions and cluster work (TVM's ``rpc.base`` has ``RPCError``)."""
from __future__ import annotations

__all__ = ["RPCError", "SessionLost", "ClusterUnavailable", "NoMatchingWorker",
           "require_distributed"]


class RPCError(RuntimeError):
    """Something went wrong between this process and the cluster (TVM's ``RPCError``)."""


class SessionLost(RPCError):
    """The remote session is over: its process crashed or timed out, its worker left the
    cluster, or it was closed. Its modules and arrays are gone; connect again."""


class ClusterUnavailable(RPCError):
    """The Dask scheduler cannot be reached (it stopped, or the connection is lost and did
    not come back in time)."""


class NoMatchingWorker(RPCError):
    """No worker of the cluster offers the requested key (Dask worker resource)."""


def require_distributed() -> None:
    """Import Dask distributed, or say how to install it."""
    try:
        import distributed  # noqa: F401
    except ImportError as err:
        raise ImportError("workbench.rpc needs Dask distributed: pip install "
                          "'workbench[cluster]' (or pip install distributed)") from err
