"""``--instructions``: instructions per call under valgrind's callgrind, application thread and all threads apart.

A benchmark re-runs itself as a child (``--callgrind-child VARIANT CALLS``) that sets up, warms up, makes CALLS
calls of one variant, flushes its pipeline (so export-thread work for those calls is done) and exits. Each
variant runs twice, with ``calls`` and with 0 calls: the difference divided by ``calls`` removes start-up,
warm-up and shutdown. ``--separate-threads=yes`` writes one profile per thread; thread 1 is the application's
thread, the others are export queues, evaluation workers and OTel's batch processor. PYTHONHASHSEED is fixed
because string hashes move dict probing by thousands of instructions per call.

Every child reads its bytecode from one cache (``PYTHONPYCACHEPREFIX``), filled by a plain run of each variant
(``warm``) before any is counted, as an installed package's ``.pyc`` files are. Without it, where the environment
sets ``PYTHONDONTWRITEBYTECODE`` (this machine does), every child compiled evaltrace's modules from source while the
installed packages it is compared with (openai, the official instrumentation) read theirs: whole-process figures
counted evaltrace's compiler time, and the first of a pair of runs could compile what the second read. The same
uncounted run fills evaltrace's file of prices already looked up (``EVALTRACE_PRICE_CACHE``, beside the bytecode), as
an application's first process does; run the benchmark with ``EVALTRACE_PRICE_CACHE=off`` to count processes that
load genai-prices' table (an application's first process after an install).
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


def _thread_totals(directory: Path) -> dict[int, int]:
    """Instructions per thread from the ``callgrind.out.<pid>-<thread>`` files of one run."""
    totals: dict[int, int] = {}
    for path in directory.glob("callgrind.out.*-*"):  # the unsuffixed file holds no counts
        thread = int(path.name.rsplit("-", 1)[1])
        found = _TOTALS.search(path.read_text(errors="replace"))
        if found is not None:
            totals[thread] = int(found.group(1))
    return totals


_CACHE: list[str] = []  # the bytecode cache of this process's children, made on first use


def _env() -> dict[str, str]:
    if not _CACHE:
        _CACHE.append(tempfile.mkdtemp(prefix="callgrind-pycache-"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    # evaltrace's file of prices already looked up (src/evaltrace/_internal/price_cache.py) lives beside the bytecode:
    # filled by the same uncounted run, as a deployed application's is by its first process, never the user's.
    env.setdefault("EVALTRACE_PRICE_CACHE", os.path.join(_CACHE[0], "evaltrace-prices.json"))
    return {**env, "PYTHONHASHSEED": "0", "PYTHONPYCACHEPREFIX": _CACHE[0]}


def warm(runs: Sequence[tuple[str, str]]) -> None:
    """Fill the children's bytecode cache: each (script, variant) run once with 0 calls, not counted."""
    for script, variant in dict.fromkeys(runs):
        command = [sys.executable, script, CHILD_FLAG, variant, "0"]
        done = subprocess.run(command, capture_output=True, text=True, env=_env(), timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"{variant}: warm-up run failed:\n{done.stderr[-2000:]}")


def _run(script: str, variant: str, calls: int) -> dict[int, int]:
    with tempfile.TemporaryDirectory(prefix="callgrind-") as tmp:
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
        done = subprocess.run(command, capture_output=True, text=True, env=_env(), timeout=1800)
        if done.returncode != 0:
            raise RuntimeError(f"{variant}: callgrind child failed:\n{done.stderr[-2000:]}")
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
    warm([(script, variant) for variant in variants])
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
