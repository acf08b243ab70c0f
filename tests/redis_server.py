"""A throwaway ``redis-server`` for the shared-limits tests: loopback only, a free port, nothing written to disk.

The binary comes from the machine (Debian's ``redis-server`` package, which ``.ci/run`` installs when missing).
Without it the tests skip, naming the reason, except under ``CI=true`` where they fail: CI must not go green by
skipping its only Redis. A test may :meth:`RedisServer.kill` the server (an outage) and :meth:`RedisServer.start`
it again on the same port (Redis comes back, empty).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

_READY_TIMEOUT_S = 30.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RedisServer:
    """One ``redis-server`` process on 127.0.0.1 (``--save '' --appendonly no``: memory only)."""

    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.port = _free_port()
        self.root = Path(tempfile.mkdtemp(prefix="evaltrace-redis-"))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start the server (again, after :meth:`kill`, on the same port) and wait until it answers PING."""
        log = open(self.root / "redis.log", "ab")
        command = [self.binary, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no",
                   "--dir", str(self.root)]  # fmt: skip
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while not self._answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                tail = (self.root / "redis.log").read_text(errors="replace")[-2000:]
                self.kill()
                raise RuntimeError(f"redis-server did not start on 127.0.0.1:{self.port}:\n{tail}")
            time.sleep(0.05)

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1.0) as conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL the server (an outage, as abrupt as a crash) and wait for it to be gone."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        self.process = None

    def flush(self) -> None:
        """Empty the database (FLUSHALL), so a test starts with full buckets and no spend."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5.0) as conn:
            conn.sendall(b"FLUSHALL\r\n")
            assert conn.recv(16).startswith(b"+OK")

    def remove(self) -> None:
        """Kill the server and delete its directory."""
        self.kill()
        shutil.rmtree(self.root, ignore_errors=True)


def redis_unavailable(reason: str) -> None:
    """Skip the test, or fail it under CI (which installs ``redis-server``)."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI is set but {reason}")
    pytest.skip(reason)


def running_redis() -> Iterator[RedisServer]:
    """The body of a fixture: a started server, killed and removed after the test."""
    binary = shutil.which("redis-server")
    if binary is None:
        redis_unavailable("redis-server is not installed (Debian package redis-server)")
    try:
        import redis  # noqa: F401
    except ImportError:
        redis_unavailable("the redis package is not installed (pip install -e '.[redis]')")
    server = RedisServer(str(binary))
    try:
        server.start()
    except (OSError, RuntimeError) as exc:
        server.remove()
        redis_unavailable(f"redis-server could not start: {exc}")
    try:
        yield server
    finally:
        server.remove()
