"""``evaltrace worker`` as a real child process for the CLI and signal tests.

Readiness is observed, never slept for: the worker's banner names its port (it listens on port 0, so no port
can be taken by someone else between choosing and binding it), then ``GET /healthz`` must answer 200. The
worker's stderr goes to a file, not a pipe: a pipe nobody drains fills up and blocks the worker's next log line,
which would look exactly like the hang these tests exist to catch.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

MAIN = "import sys; from evaltrace.cli import main; sys.exit(main())"
READY_TIMEOUT_S = 60.0  # generous: a loaded machine (load 10 and more) starts Python and its imports slowly
# How long a test waits for a signalled worker to exit. Not the bound under test: the worker's own watchdog exits
# with 1 once --shutdown-timeout + 4 s have passed without a finished stop, so exit code 0 proves a stop in time.
# The wait only has to outlast that watchdog on a loaded machine, where 10 s failed.
STOP_TIMEOUT_S = 30.0
_BANNER = re.compile(r"OTLP/HTTP on (http://127\.0\.0\.1:\d+)/v1/traces")


@dataclass
class WorkerProcess:
    """A running ``evaltrace worker`` child."""

    process: subprocess.Popen[bytes]
    log: Path
    url: str = ""

    def output(self) -> str:
        """Everything the worker wrote to stderr so far."""
        return self.log.read_text(errors="replace")

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> str:
        """Wait for the banner, then for ``/healthz`` to answer; return the OTLP/HTTP base URL."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                raise AssertionError(f"worker exited with {self.process.returncode} before ready:\n{self.output()}")
            if not self.url and (match := _BANNER.search(self.output())):
                self.url = match.group(1)
            if self.url and _healthy(self.url):
                return self.url
            if time.monotonic() > deadline:
                raise AssertionError(f"worker not ready within {timeout_s}s:\n{self.output()}")
            time.sleep(0.005)  # a polling interval, not a guess at how long startup takes

    def stop(self, signum: int = signal.SIGTERM, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """Send ``signum`` and return the exit code; fail (after killing it) if it does not exit in time."""
        self.process.send_signal(signum)
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"worker still running {timeout_s}s after signal {signum}:\n{self.output()}") from None

    def kill(self) -> None:
        """SIGKILL the worker if it still runs (test cleanup)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def start_worker(workdir: Path, *args: str, name: str = "worker") -> WorkerProcess:
    """Start ``evaltrace worker --port 0 ARGS...`` in ``workdir`` (importable: modules written there)."""
    log = workdir / f"{name}.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-c", MAIN, "worker", "--port", "0", *args],
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    return WorkerProcess(process, log)


# One process imports what `evaltrace worker` imports before it checks its settings (~2.5 s of CPU, paid by every
# process that runs the command), then forks a child per case. Each child is the command as far as its checks go:
# its own argv, working directory (``python -c`` puts it first on sys.path, as MAIN's process has it), stderr on
# fd 2, and its exit status from ``sys.exit(main())``; only the imports were made before the fork.
_REFUSALS = r"""
import json, os, sys, time

import evaltrace.cli, evaltrace.cli.worker, evaltrace.worker, evaltrace.worker.defaults

cases, timeout_s = json.loads(sys.argv[1]), float(sys.argv[2])
codes = []
for workdir, args in cases:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.chdir(workdir)
        os.dup2(os.open("stderr.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        sys.argv = ["-c", "worker", "--port", "0", *args]
        sys.exit(evaltrace.cli.main())
    deadline = time.monotonic() + timeout_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            codes.append(os.waitstatus_to_exitcode(status))
            break
        if time.monotonic() > deadline:  # the command did not refuse: it serves (the check under test is gone)
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            codes.append(None)
            break
        time.sleep(0.02)
print(json.dumps(codes))
"""


def refusals(root: Path, cases: list[list[str]], timeout_s: float = 60.0) -> list[tuple[int | None, str]]:
    """(exit status, stderr) of ``evaltrace worker --port 0 ARGS...`` for each ARGS in ``cases``.

    Each case runs in a directory of its own under ``root`` (``root/<index>``), in a process forked after the
    command's imports (see ``_REFUSALS``). The status is None when the command was still running after
    ``timeout_s`` (it was killed): a setting it should have refused was accepted.
    """
    dirs = []
    for index in range(len(cases)):
        (root / str(index)).mkdir(parents=True)
        dirs.append(str(root / str(index)))
    done = subprocess.run(
        [sys.executable, "-c", _REFUSALS, json.dumps(list(zip(dirs, cases, strict=True))), str(timeout_s)],
        cwd=root, capture_output=True, text=True, timeout=timeout_s * len(cases) + 120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    codes = json.loads(done.stdout.splitlines()[-1])
    return [(code, (Path(d) / "stderr.txt").read_text()) for code, d in zip(codes, dirs, strict=True)]
