"""``--instructions``: instructions per call under valgrind's callgrind, application thread and all threads apart.

A benchmark re-runs itself as a child (``--callgrind-child VARIANT CALLS``) that sets up, warms up, makes CALLS
calls of one variant, flushes its pipeline (so export-thread work for those calls is done) and exits. Each
variant runs twice, with ``calls`` and with 0 calls: the difference divided by ``calls`` removes start-up,
warm-up and shutdown. ``--separate-threads=yes`` writes one profile per thread; thread 1 is the application's
thread, the others are export queues, evaluation workers and OTel's batch processor. PYTHONHASHSEED is fixed
because string hashes move dict probing by thousands of instructions per call.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

CHILD_FLAG = "--callgrind-child"
SPLIT_ENV = "EVALTRACE_BENCH_SPLIT"
"""Set (to a directory) by :func:`run_split`: the child forks at :func:`split_calls` instead of calling."""
_TOTALS = re.compile(r"^(?:summary|totals):\s*(\d+)", re.MULTILINE)


@dataclass(frozen=True)
class PerCall:
    """Instructions per call of one variant."""

    app_thread: float
    all_threads: float


def child_request(argv: Sequence[str]) -> tuple[str, int] | None:
    """Return (variant, calls) when this process is a callgrind child, else None."""
    if len(argv) >= 4 and argv[1] == CHILD_FLAG:
        return argv[2], int(argv[3])
    return None


def _thread_totals(directory: Path, pid: int | None = None) -> dict[int, int]:
    """Instructions per thread from the ``callgrind.out.<pid>-<thread>`` files of one run (of one process)."""
    totals: dict[int, int] = {}
    pattern = "callgrind.out.*-*" if pid is None else f"callgrind.out.{pid}-*"
    for path in directory.glob(pattern):  # the unsuffixed file holds no counts
        thread = int(path.name.rsplit("-", 1)[1])
        found = _TOTALS.search(path.read_text(errors="replace"))
        if found is not None:
            totals[thread] = int(found.group(1))
    return totals


def split_calls(calls: int) -> int:
    """Where a child's measured calls start: ``calls``, or, in a :func:`run_split` run, fork into two children.

    The 0-call and the ``calls``-call runs of a variant are identical up to this point (same set-up, same
    warm-up, PYTHONHASHSEED fixed), so instead of starting, importing and warming up twice under callgrind, the
    process forks here: a first child goes on with 0 calls, then a second with ``calls``; the parent waits and
    exits unmeasured. A forked child's callgrind counts include everything before the fork, so each child's
    totals are those of a separate run of its own, and their difference is unchanged (the warm-up and set-up
    were never in it). The second child inherits the parent's side of the first fork and its wait; the first
    makes and waits for a fork of its own, so both carry that cost alike.

    Args:
        calls: The calls the child was asked for.

    Returns:
        The calls this process makes (``calls`` when not split).
    """
    directory = os.environ.get(SPLIT_ENV)
    if not directory:
        return calls
    pids = []
    for n in (0, calls):
        pid = os.fork()
        if pid == 0:
            if n == 0:
                twin = os.fork()
                if twin == 0:
                    os._exit(0)
                os.waitpid(twin, 0)
            return n
        _, status = os.waitpid(pid, 0)
        if status != 0:
            os._exit(1)
        pids.append(pid)
    Path(directory, "pids").write_text(" ".join(map(str, pids)))
    os._exit(0)


def _valgrind(tmp: str, script: str, variant: str, calls: int, env: dict[str, str]) -> None:
    command = [
        "valgrind",
        "--tool=callgrind",
        "--separate-threads=yes",
        f"--callgrind-out-file={tmp}/callgrind.out.%p",
        sys.executable,
        script,
        CHILD_FLAG,
        variant,
        str(calls),
    ]
    done = subprocess.run(command, capture_output=True, text=True, env={**env, "PYTHONHASHSEED": "0"}, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"{variant}: callgrind child failed:\n{done.stderr[-2000:]}")


def run_split(script: str, variant: str, calls: int) -> tuple[dict[int, int], dict[int, int]]:
    """Per-thread totals of the 0-call and the ``calls``-call runs of ``variant``, from one forking process.

    The child must call :func:`split_calls` where its measured calls start (the figures are those of two
    :func:`run_totals` runs; see there).
    """
    with tempfile.TemporaryDirectory(prefix="callgrind-") as tmp:
        _valgrind(tmp, script, variant, calls, {**os.environ, SPLIT_ENV: tmp})
        pids = Path(tmp, "pids")
        if not pids.exists():
            raise RuntimeError(f"{variant}: the child never reached split_calls()")
        empty, full = (_thread_totals(Path(tmp), int(pid)) for pid in pids.read_text().split())
    for totals in (empty, full):
        if 1 not in totals:
            raise RuntimeError(f"{variant}: no callgrind profile for the main thread")
    return empty, full


def _run(script: str, variant: str, calls: int) -> dict[int, int]:
    with tempfile.TemporaryDirectory(prefix="callgrind-") as tmp:
        _valgrind(tmp, script, variant, calls, {k: v for k, v in os.environ.items() if k != SPLIT_ENV})
        totals = _thread_totals(Path(tmp))
    if 1 not in totals:
        raise RuntimeError(f"{variant}: no callgrind profile for the main thread")
    return totals


def run_totals(script: str, variant: str, calls: int) -> dict[int, int]:
    """Instructions per thread (thread 1 the application's) of one child run of ``variant`` making ``calls`` calls."""
    return _run(script, variant, calls)


def measure(script: str, variants: Sequence[str], calls: int, jobs: int = 2) -> dict[str, PerCall]:
    """Instructions per call of each variant of ``script`` (run as children under callgrind)."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    runs = [(variant, n) for variant in variants for n in (0, calls)]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        totals = dict(zip(runs, pool.map(lambda run: _run(script, *run), runs), strict=True))
    out: dict[str, PerCall] = {}
    for variant in variants:
        empty, full = totals[(variant, 0)], totals[(variant, calls)]
        out[variant] = PerCall(
            app_thread=(full[1] - empty[1]) / calls,
            all_threads=(sum(full.values()) - sum(empty.values())) / calls,
        )
    return out


def report(results: dict[str, PerCall], floor: str, *, print_: Callable[[str], None] = print) -> None:
    """Print instructions per call and ratios to the ``floor`` variant, per thread scope."""
    base = results[floor]
    print_(f"{'variant':34} {'app thread':>12} {'x floor':>8} {'all threads':>12} {'x floor':>8}")
    for name, value in results.items():
        print_(
            f"{name:34} {value.app_thread:12,.0f} {value.app_thread / base.app_thread:8.2f} "
            f"{value.all_threads:12,.0f} {value.all_threads / base.all_threads:8.2f}"
        )
