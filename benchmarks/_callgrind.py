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

Counted from the measured phase (``run_totals(..., from_collect=True)``, the smoke run): callgrind starts with its
instrumentation off (``--instr-atstart=no``) and the child turns it on when its first explicit ``gc.collect()``
returns (a call made in the child's own script, not one a library makes). Every child collects once, right after its
set-up and warm-up and before its measured calls, so that no cyclic collection lands in one run and not the other.
What comes before (interpreter, SDKs, set-up, warm-up) is the same in the 0-call and the N-call runs and cancels in
their difference; uninstrumented it runs several times faster. The runs still count everything after that point (the
calls, the flush, shutdown and exit, every thread), so a figure is the same difference of two runs as before. The
switch is a callgrind client request (``START_INSTRUMENTATION``) made through a few bytes of x86-64 machine code
(:func:`_client_request`), so no compiler is needed; ``--dump-before`` and client-request dumps were not usable as
phase markers, as they write the calling thread alone and the export threads' counts would stay in one total.

That is what a paired child wants, though (:func:`run_phases`): a child that measures several things on its
application thread in one process marks each with :func:`phase_begin` / :func:`phase_end` (callgrind's
``ZERO_STATS`` and ``DUMP_STATS`` requests), and gets each phase's count alone. ``layout`` (``run_totals``,
``run_phases``) pads the child's heap with a seeded set of objects before the SDKs are imported (:func:`padding`), so
that a figure can be taken under several memory layouts: CPython's type cache and address-hashed dicts and sets make
the counts of the same code follow where things were allocated (benchmarks/README.md, "Figures that do not follow
the memory layout").
"""

from __future__ import annotations

import gc
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
FROM_COLLECT_ENV = "EVALTRACE_CALLGRIND_FROM_COLLECT"  # set in a child whose counting starts at gc.collect()
LAYOUT_ENV = "EVALTRACE_CALLGRIND_LAYOUT"  # set in a child to the seed of its heap padding (see pad_layout)
_TOTALS = re.compile(r"^(?:summary|totals):\s*(\d+)", re.MULTILINE)


@dataclass(frozen=True)
class PerCall:
    """Instructions per call of one variant."""

    app_thread: float
    all_threads: float


def child_request(argv: Sequence[str]) -> tuple[str, int] | None:
    """Return (variant, calls) when this process is a callgrind child, else None.

    In a child run with ``from_collect=True``, also make the first ``gc.collect()`` turn callgrind's
    instrumentation on.
    """
    if len(argv) >= 4 and argv[1] == CHILD_FLAG:
        if os.environ.get(FROM_COLLECT_ENV) == "1":
            _count_from_first_collect()
        return argv[2], int(argv[3])
    return None


# x86-64 System V, ``uint64_t request(uint64_t *args)``: valgrind's client-request sequence (the four ``rol``s of
# %rdi by 128 bits in all, then ``xchg %rbx,%rbx``) with %rax pointing at the request and its five arguments; the
# result comes back in %rdx, 0 when not running under valgrind (as valgrind.h's VALGRIND_DO_CLIENT_REQUEST_EXPR).
_REQUEST_CODE = bytes.fromhex("4889f831d248c1c70348c1c70d48c1c73d48c1c7334887db4889d0c3")
_START_INSTRUMENTATION = 0x43540004  # VG_USERREQ_TOOL_BASE('C','T') + 4 (callgrind.h)
_TOGGLE_COLLECT = 0x43540002  # VG_USERREQ_TOOL_BASE('C','T') + 2: cost collection off/on, instrumentation left on
_DUMP_STATS = 0x43540000  # + 0: write the calling thread's counts so far to the next numbered file, and zero them
_ZERO_STATS = 0x43540001  # + 1: zero the calling thread's counts
_REQUEST: list[Callable[[int], int]] = []  # the request made once, so that a phase's bounds allocate nothing


def _client_request(code: int) -> int:
    """Make one valgrind client request with no arguments; its result (0 when not under valgrind)."""
    if not _REQUEST:
        import ctypes  # here: a whole-process count (the start-up row) does not pay for them
        import mmap

        page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        page.write(_REQUEST_CODE)
        call = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
        args = (ctypes.c_uint64 * 6)()

        def request(code: int, _code_page: mmap.mmap = page) -> int:  # the default keeps the page mapped
            args[0] = code
            return int(call(ctypes.addressof(args)))

        _REQUEST.append(request)
    return _REQUEST[0](code)


def count_from_here() -> None:
    """In a child run with ``from_collect=True``: count from here on, not from the first ``gc.collect()``.

    For a child whose figure counts its warm-up too (the Anthropic stream slope counts its warm-up streams): called
    after the set-up, before the warm-up. A no-op in any other process.
    """
    if os.environ.get(FROM_COLLECT_ENV) == "1":
        gc.collect = _COLLECT[0]  # the window is open: a later collection is part of what is measured
        _client_request(_START_INSTRUMENTATION)


def count_to_here() -> None:
    """In a child run with ``from_collect=True``: count nothing from here to the exit.

    For the stream slopes, whose figure is the application thread's measured streams alone: the interpreter's
    teardown after them frees what the run allocated, and its cost moved by 1-2.4M instructions between runs of the
    same child (glibc's ``malloc`` bins and the type cache follow the process's memory layout), which is up to 2k
    per event of a 1,080-event slope. (``CALLGRIND_STOP_INSTRUMENTATION`` would drop the counts gathered so far;
    toggling collection keeps them.) A no-op in any other process.
    """
    if os.environ.get(FROM_COLLECT_ENV) == "1":
        _client_request(_TOGGLE_COLLECT)


def phase_begin() -> None:
    """In a child run with ``from_collect=True``: zero the calling thread's counts, the start of a counted phase.

    With :func:`phase_end`, for a child that measures several things in one process (:func:`run_phases`). A no-op
    in any other process.
    """
    if os.environ.get(FROM_COLLECT_ENV) == "1":
        # The measured phases run with the collector off, so its young generation's count (allocations less
        # deallocations since the last collection) only grows; once over its threshold (700), every container
        # allocation of anyone's (the client's ~750 per OpenAI chunk) takes the longer branch of
        # ``_PyObject_GC_Link``. A side that kept a few hundred more objects alive than the other crossed it first
        # and paid ~420 instructions per chunk that no process with the collector on ever pays (it collects
        # there instead; benchmarks/README.md, "s25-chunk"). Each phase starts as right after a collection of that
        # generation, uncounted.
        _COLLECT[0](0)
        _client_request(_ZERO_STATS)


def phase_end() -> None:
    """In a child run with ``from_collect=True``: write the calling thread's counts since :func:`phase_begin`."""
    if os.environ.get(FROM_COLLECT_ENV) == "1":
        _client_request(_DUMP_STATS)


_COLLECT = [gc.collect]


def padding(seed: int) -> list[bytes]:
    """The heap padding of layout ``seed``: a few thousand objects of mixed sizes, the same for the same seed.

    Sizes span obmalloc's small classes and glibc ``malloc``'s (over 512 bytes); every third is dropped again, so
    that later allocations also land in the holes. Seed 0 is no padding (the process's own layout).
    """
    import random  # here: only a padded child pays for it

    if seed == 0:
        return []
    draw = random.Random(seed)
    objects = [
        bytes(draw.choice((draw.randrange(1, 512), draw.randrange(512, 4096))))
        for _ in range(draw.randrange(500, 4000))
    ]
    return [obj for i, obj in enumerate(objects) if i % 3]


# Kept for the process's life. Made when the child imports this module, i.e. before the SDKs and evaltrace.
_PADDING = padding(int(os.environ.get(LAYOUT_ENV, "0")))


def _count_from_first_collect() -> None:
    collect = gc.collect
    script = os.path.realpath(sys.argv[0])

    def collect_then_count(generation: int = 2) -> int:
        found = collect(generation)
        if os.path.realpath(sys._getframe(1).f_code.co_filename) != script:
            return found  # a library's collection, not the child's own: still setting up
        gc.collect = collect  # once: a later collection is part of what is measured
        _client_request(_START_INSTRUMENTATION)
        return found

    gc.collect = collect_then_count


def _thread_totals(directory: Path) -> dict[int, int]:
    """Instructions per thread from the ``callgrind.out.<pid>-<thread>`` files of one run."""
    totals: dict[int, int] = {}
    for path in directory.glob("callgrind.out.*-*"):  # the unsuffixed file holds no counts
        if "." in path.name.removeprefix("callgrind.out."):
            continue  # a phase's file (callgrind.out.<pid>.<n>-<thread>, run_phases), not the run's
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


def warm(runs: Sequence[tuple[str, str]], jobs: int = 1) -> None:
    """Fill the children's bytecode cache: each (script, variant) run once with 0 calls, not counted.

    ``jobs`` runs at once (a module compiled by two of them at once is written twice, alike: Python writes its
    ``.pyc`` to a temporary file and renames it).
    """

    def one(run: tuple[str, str]) -> None:
        script, variant = run
        command = [sys.executable, script, CHILD_FLAG, variant, "0"]
        done = subprocess.run(command, capture_output=True, text=True, env=_env(), timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"{variant}: warm-up run failed:\n{done.stderr[-2000:]}")

    _env()  # the cache is made here, before threads could each make one
    # What only a counted child imports (``_client_request``'s ctypes; mmap is a C module, imported alike): compiled
    # into the cache here, or the first counted child of a run compiles it, and its heap, so its figures, differ
    # from every later one's.
    done = subprocess.run([sys.executable, "-c", "import ctypes, mmap"], capture_output=True, text=True, env=_env())
    if done.returncode != 0:
        raise RuntimeError(f"warm-up of ctypes and mmap failed:\n{done.stderr[-2000:]}")
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, dict.fromkeys(runs)))


def can_count_from_collect() -> bool:
    """Whether ``from_collect`` runs work here: the client request is x86-64 Linux machine code."""
    import platform

    return sys.platform == "linux" and platform.machine() in ("x86_64", "AMD64")


def _phase_totals(directory: Path) -> list[int]:
    """The application thread's instructions in each phase of one run, in order (``callgrind.out.<pid>.<n>-01``)."""
    found: dict[int, int] = {}
    for path in directory.glob("callgrind.out.*.*-01"):
        number = int(path.name.rsplit("-", 1)[0].rsplit(".", 1)[1])
        summary = re.search(r"^summary:\s*(\d+)", path.read_text(errors="replace"), re.MULTILINE)
        if summary is not None:
            found[number] = int(summary.group(1))
    return [found[n] for n in sorted(found)]


def _run(
    script: str, variant: str, calls: int, from_collect: bool = False, layout: int = 0, phases: list[int] | None = None
) -> dict[int, int]:
    env = {**_env(), FROM_COLLECT_ENV: "1"} if from_collect else _env()
    env[LAYOUT_ENV] = str(layout)
    with tempfile.TemporaryDirectory(prefix="callgrind-") as tmp:
        command = [
            "valgrind",
            "--tool=callgrind",
            "--separate-threads=yes",
            *(["--instr-atstart=no"] if from_collect else []),
            f"--callgrind-out-file={tmp}/callgrind.out.%p",
            sys.executable,
            script,
            CHILD_FLAG,
            variant,
            str(calls),
        ]
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)
        if done.returncode != 0:
            raise RuntimeError(f"{variant}: callgrind child failed:\n{done.stderr[-2000:]}")
        totals = _thread_totals(Path(tmp))
        if phases is not None:
            phases.extend(_phase_totals(Path(tmp)))
    if not totals.get(1):
        where = " (does the child call gc.collect() before its measured calls?)" if from_collect else ""
        raise RuntimeError(f"{variant}: no callgrind counts for the main thread{where}")
    return totals


def run_totals(script: str, variant: str, calls: int, *, from_collect: bool = False, layout: int = 0) -> dict[int, int]:
    """Instructions per thread (thread 1 the application's) of one child run of ``variant`` making ``calls`` calls.

    ``from_collect``: count from the child's first ``gc.collect()`` on (see the module's docstring), not from the
    interpreter's start. ``layout``: the seed of the child's heap padding (:func:`padding`; 0: none).
    """
    return _run(script, variant, calls, from_collect, layout)


def run_phases(script: str, variant: str, calls: int, *, layout: int = 0) -> list[int]:
    """Application-thread instructions of each phase (:func:`phase_begin` to :func:`phase_end`) of one child run.

    Counted as ``from_collect=True``. ``layout``: the seed of the child's heap padding (:func:`padding`; 0: none).
    """
    phases: list[int] = []
    _run(script, variant, calls, True, layout, phases)
    if not phases:
        raise RuntimeError(f"{variant}: no phase was counted (does the child call phase_begin/phase_end?)")
    return phases


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
