"""Remote sessions on a Dask cluster: TVM's ``tvm.rpc``, with Dask as the tracker and server.

Floor 4 (uses the runtime). Start a cluster with Dask's own commands::

    dask scheduler                                            # on one machine
    dask worker tcp://HOST:8786 --nthreads 1 --resources "workbench-x86-avx512=1"

and connect from Python (a notebook on a laptop, say)::

    from workbench import rpc
    session = rpc.connect("tcp://HOST:8786", key="workbench-x86-avx512")
    session.target                         # the worker's CPU, detected there
    session.upload("kernels.o"); lib = session.load_module("kernels.o")
    dev = session.cpu(0); a = workbench.nd.array(x, dev)
    lib["main"](a, ...); lib.time_evaluator("main", dev)(a, ...)
    vm = relax.VirtualMachine(session.load_module("model.vmexe"), dev)

``rpc.connect()`` with no address starts an in-process cluster (2 worker threads; option
``rpc_local_workers``). The tuner's ``Runner.create("rpc")`` and ``Builder.create("dask")``
use the same clusters (see :class:`RPCConfig`).

Where code runs: a Dask worker never loads or runs a kernel itself. Each session lives in a
child process of its worker (started fresh, never forked), and so do the runner's
measurements and the builder's compilations (:mod:`workbench.rpc.child`): a segfaulting
kernel ends that child -- the session reports :class:`SessionLost`, a measurement a failed
run -- and the worker carries on.

Trust: a Dask cluster runs whatever code its clients send, and this package sends it
compiled kernels and Python jobs, exactly as TVM's RPC server runs uploaded code. Use
clusters you trust, on networks you trust; for anything beyond localhost turn on TLS
(``security=distributed.Security(...)``, passed to Dask as is).
"""
from workbench.rpc.base import ClusterUnavailable, NoMatchingWorker, RPCError, SessionLost
from workbench.rpc.cluster import Cluster, WorkerInfo, get_cluster, shutdown
from workbench.rpc.config import RPCConfig
from workbench.rpc.local import LocalSession
from workbench.rpc.objects import (
    RemoteDevice, RemoteFunction, RemoteModule, RemoteNDArray, RemoteObject, RemoteTimeEvaluator,
)
from workbench.rpc.session import (
    RemoteSession, RPCSession, TrackerSession, connect, connect_tracker,
)
from workbench.rpc.vm import RemoteVirtualMachine

__all__ = [
    "connect", "connect_tracker", "LocalSession", "RemoteSession", "RPCSession", "TrackerSession", "RPCConfig",
    "RemoteDevice", "RemoteNDArray", "RemoteModule", "RemoteFunction", "RemoteObject",
    "RemoteTimeEvaluator", "RemoteVirtualMachine", "Cluster", "WorkerInfo", "get_cluster",
    "shutdown", "RPCError", "SessionLost", "ClusterUnavailable", "NoMatchingWorker",
]
