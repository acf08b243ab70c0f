"""A real two-node Ray cluster on 127.0.0.1 for the ``--engine ray`` tests, and what it listens on.

Ray resolves a bootstrap address of ``127.0.0.1`` to the machine's own address whenever multi-node clusters are
enabled (Linux), which a cluster bound to loopback does not answer; ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``
(:data:`LOOPBACK_ENV`) keeps it on loopback in every process that connects (the test process, a CLI driver).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
"""Connect to a loopback cluster through 127.0.0.1 rather than the machine's network address."""

_NODE = {"node_ip_address": "127.0.0.1", "include_dashboard": False, "object_store_memory": 80 * 1024 * 1024}


def descendants(root: int) -> set[int]:
    """Every live process below ``root`` (from /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as handle:
                    parents[int(entry)] = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found: set[int] = set()
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for child, ppid in parents.items():
            if ppid == parent and child not in found:
                found.add(child)
                frontier.append(child)
    return found


def _socket_inodes(pids: set[int]) -> set[str]:
    inodes = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    return inodes


def _is_loopback(hex_address: str) -> bool:
    host = hex_address.split(":")[0]
    if len(host) == 8:  # IPv4, little-endian: 127.x.x.x ends in 7F
        return host.endswith("7F")
    mapped_v4 = host.startswith("0000000000000000FFFF0000")
    return (mapped_v4 and host.endswith("7F")) or host == "00000000000000000000000001000000"  # ::1


def listening_addresses(pids: set[int]) -> list[tuple[str, bool]]:
    """(local address as /proc/net shows it, whether it is loopback) of every TCP socket ``pids`` listen on."""
    inodes = _socket_inodes(pids)
    found = []
    for table in ("tcp", "tcp6"):
        with open(f"/proc/net/{table}", encoding="utf-8") as handle:
            next(handle)
            for line in handle:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                    found.append((fields[1], _is_loopback(fields[1])))
    return found


def ray_processes() -> set[int]:
    """This process's descendants that are Ray's (gcs_server, raylet, workers, ...)."""
    found = set()
    for pid in descendants(os.getpid()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ")
        except OSError:
            continue
        if b"ray" in cmdline:
            found.add(pid)
    return found


@contextmanager
def two_node_cluster() -> Iterator[tuple[Any, Any]]:
    """A head (1 CPU) and a worker node (2 CPUs) on 127.0.0.1, this process connected as the driver.

    Yields (cluster, worker node). Everything is shut down after, and no Ray process of it may remain.
    """
    import ray
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    saved_env = {key: os.environ.get(key) for key in LOOPBACK_ENV}
    os.environ.update(LOOPBACK_ENV)
    saved_flag = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False  # read at import: the variable alone is too late for this process
    cluster = Cluster()
    try:
        # wait=False, then one generous wait: at load 10 on 2 cores a node can take longer than Ray's 30 s default.
        cluster.add_node(wait=False, **_NODE, num_cpus=1)
        worker = cluster.add_node(wait=False, **_NODE, num_cpus=2)
        cluster.wait_for_nodes(timeout=180)
        ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
        yield cluster, worker
    finally:
        ray.shutdown()
        cluster.shutdown()
        ray_constants.ENABLE_RAY_CLUSTER = saved_flag
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    deadline = time.monotonic() + 60
    while ray_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    left = ray_processes()
    assert not left, f"Ray processes outlived the cluster: {sorted(left)}"
