r"""``evaltrace worker``: evaluate spans out of process (OTLP in, enriched spans and scores out).

Example (Jaeger receives the enriched spans, scores go to a JSONL file and to Langfuse)::

    evaltrace worker --port 4318 --evaluators mypkg.evals:EVALUATORS \
        --otlp-endpoint http://jaeger:4318 --sink jsonl:scores.jsonl --sink langfuse

SIGTERM and SIGINT stop it: new exports get 503 / UNAVAILABLE, what was received is evaluated and forwarded,
scores reach their sinks (or dead-letter files), all within ``--shutdown-timeout``; then it exits 0. Whatever
happens, the process is gone ``--shutdown-timeout`` + 4 s after the signal (:class:`ExitWatchdog`).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from evaltrace.cli._untrusted import clean
from evaltrace.exceptions import ConfigError
from evaltrace.worker.limits import ReceiverLimits
from evaltrace.worker.security import TOKEN_ENV, TlsFiles, TokenAuth, exposure_warning

DEFAULT_EVALUATORS = "evaltrace.worker.defaults:EVALUATORS"
REDIS_URL_ENV = "EVALTRACE_REDIS_URL"
# 5 s of draining plus the watchdog's margin stays under Docker's default 10 s between SIGTERM and SIGKILL.
DEFAULT_SHUTDOWN_TIMEOUT_S = 5.0
# Past a drain deadline that running evaluations used up, the evaluation processor's fixed clean-up steps
# (cancelled jobs forwarding their spans, stopping its loop) take up to about 3 s: the watchdog allows for them.
WATCHDOG_MARGIN_S = 4.0
# How long interpreter exit may take once stopping is done (joining threads, atexit handlers).
EXIT_GRACE_S = 2.0


def register(subparsers: Any) -> None:
    """Add the ``worker`` command."""
    worker = subparsers.add_parser(
        "worker",
        help="receive OTLP spans, evaluate them, forward enriched spans and scores",
        description="Receive OTLP traces (HTTP /v1/traces, optionally gRPC), run evaluators on them, export the "
        "enriched spans and send scores to sinks.",
    )
    worker.add_argument("--host", default="127.0.0.1", help="interface to listen on (0.0.0.0 in a container)")
    worker.add_argument("--port", type=int, default=4318, help="OTLP/HTTP port (default 4318)")
    worker.add_argument(
        "--grpc-port", type=int, help="also serve OTLP/gRPC on this port (for a loadbalancing collector)"
    )
    worker.add_argument(
        "--evaluators",
        action="append",
        metavar="MODULE:NAME",
        help=f"evaluators to run: a list, one evaluator, or a factory (repeatable; default {DEFAULT_EVALUATORS})",
    )
    worker.add_argument(
        "--sink", action="append", default=[], metavar="SPEC", help="score sink: jsonl:PATH, langfuse, phoenix[:URL]"
    )
    worker.add_argument("--otlp-endpoint", help="export enriched spans here (Jaeger, a collector)")
    worker.add_argument("--protocol", choices=("http/protobuf", "grpc"), help="protocol of --otlp-endpoint")
    worker.add_argument("--headers", help="headers for --otlp-endpoint, k=v,k2=v2")
    worker.add_argument(
        "--local-store", metavar="DIR", help="also write enriched spans to this local store (default .evaltrace "
        "when no --otlp-endpoint is given)"
    )  # fmt: skip
    worker.add_argument(
        "--max-inflight", type=int, metavar="N",
        help="optionally, also cap the spans in flight (admitted, not yet exported) before answering 503; "
        "a request alone is always admitted (default: no cap, --max-inflight-bytes bounds the work)",
    )  # fmt: skip
    worker.add_argument("--hold-timeout", type=float, default=10.0, help="seconds a span may wait for its scores")
    worker.add_argument(
        "--session-quiet-period",
        type=float,
        metavar="SECONDS",
        help="session-scope evaluators judge a session this long after its last trace (default 120)",
    )
    worker.add_argument("--retry-after", type=int, default=1, help="Retry-After seconds sent with 503")
    worker.add_argument(
        "--redis-url", default=os.environ.get(REDIS_URL_ENV), metavar="URL",
        help="share evaluator rate limits and judge budgets with every replica given the same Redis "
        f"(redis://host:6379/0; default: ${REDIS_URL_ENV}); without it, each replica has its own",
    )  # fmt: skip
    _limit_arguments(worker)
    _access_arguments(worker)
    worker.add_argument(
        "--shutdown-timeout", type=float, default=DEFAULT_SHUTDOWN_TIMEOUT_S, metavar="SECONDS",
        help="on SIGTERM/SIGINT, time allowed to finish evaluations and deliver scores and spans "
        f"(default {DEFAULT_SHUTDOWN_TIMEOUT_S:g}; the process exits at most {WATCHDOG_MARGIN_S:g} s later)",
    )  # fmt: skip
    worker.set_defaults(func=run_worker)


_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(kib|mib|gib|b)?\s*", re.IGNORECASE)
_UNITS = {None: 1, "b": 1, "kib": 1024, "mib": 1024**2, "gib": 1024**3}


def _size(text: str) -> int:
    """``1048576``, ``512KiB``, ``20MiB`` or ``1GiB`` -> bytes (an argparse type)."""
    match = _SIZE.fullmatch(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (e.g. 1048576, 512KiB, 20MiB)")
    unit = match.group(2).lower() if match.group(2) else None
    value = int(float(match.group(1)) * _UNITS[unit])
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least one byte")
    return value


def _limit_arguments(worker: argparse.ArgumentParser) -> None:
    defaults = ReceiverLimits()
    mib = 1024 * 1024
    group = worker.add_argument_group("limits (see docs/viewing.md)")
    group.add_argument(
        "--max-body-size", type=_size, default=defaults.max_body_bytes, metavar="SIZE",
        help=f"largest request body or gRPC message, on the wire and decompressed; larger gets 413 "
        f"(default {defaults.max_body_bytes // mib}MiB)",
    )  # fmt: skip
    group.add_argument(
        "--max-connections", type=int, default=defaults.max_connections, metavar="N",
        help=f"HTTP connections (and gRPC calls) served at once; more get 503 (default {defaults.max_connections})",
    )  # fmt: skip
    group.add_argument(
        "--idle-timeout", type=float, default=defaults.idle_timeout_s, metavar="SECONDS",
        help=f"close a connection that sends nothing for this long (default {defaults.idle_timeout_s:g})",
    )  # fmt: skip
    group.add_argument(
        "--request-timeout", type=float, default=defaults.request_timeout_s, metavar="SECONDS",
        help=f"close a connection whose request takes longer to arrive (default {defaults.request_timeout_s:g})",
    )  # fmt: skip
    group.add_argument(
        "--max-inflight-bytes", type=_size, default=defaults.max_inflight_bytes, metavar="SIZE",
        help="work in flight: bytes of requests being read and decoded, then of their spans until exported; "
        "more gets 503 + Retry-After, a request alone is always admitted "
        f"(default {defaults.max_inflight_bytes // mib}MiB)",
    )  # fmt: skip
    group.add_argument(
        "--max-json-depth", type=int, default=defaults.max_json_depth, metavar="N",
        help=f"deepest nesting of an OTLP/JSON body; deeper gets 400 (default {defaults.max_json_depth})",
    )  # fmt: skip


def _access_arguments(worker: argparse.ArgumentParser) -> None:
    group = worker.add_argument_group("access")
    group.add_argument(
        "--auth-token", default=os.environ.get(TOKEN_ENV), metavar="TOKEN",
        help=f"require this token on every export (default: ${TOKEN_ENV}, which keeps it out of the process "
        "list); /healthz stays open",
    )  # fmt: skip
    group.add_argument(
        "--auth-header", default="Authorization", metavar="NAME",
        help="header carrying the token: Authorization (value 'Bearer TOKEN', the default) or any other header "
        "(value TOKEN)",
    )  # fmt: skip
    group.add_argument("--tls-cert", metavar="PEM", help="serve HTTPS and gRPC over TLS with this certificate chain")
    group.add_argument("--tls-key", metavar="PEM", help="private key of --tls-cert")


def _access(args: argparse.Namespace) -> tuple[TokenAuth | None, TlsFiles | None]:
    """The token and TLS settings from the command line; ConfigError when they do not make sense."""
    auth = TokenAuth(args.auth_token, args.auth_header) if args.auth_token is not None else None
    if (args.tls_cert is None) != (args.tls_key is None):
        raise ConfigError("tls_cert" if args.tls_cert is None else "tls_key", "--tls-cert and --tls-key go together")
    tls = TlsFiles(Path(args.tls_cert), Path(args.tls_key)) if args.tls_cert is not None else None
    return auth, tls


class ExitWatchdog:
    """End the process (``os._exit``) when stopping or interpreter exit overruns its bound.

    Every wait of the worker's stop is bounded, but two things are not ours to bound: the interpreter's exit
    joins every non-daemon thread without a timeout (an evaluator's ``asyncio.to_thread`` call stuck on a
    socket keeps the process alive for ever), and a sink's or exporter's own ``shutdown()`` could block. The
    watchdog runs on a daemon thread, which keeps running while the main thread is blocked in either.

    Args:
        hard_deadline_s: From now, the longest the process lives whatever happens; if :meth:`stopped` was not
            called by then, it exits with 1 (the drain did not finish: what was left is lost).
        exit_grace_s: After :meth:`stopped`, how long interpreter exit may take before the watchdog exits with
            the code given to :meth:`stopped` (the drain finished; only the exit was held).
    """

    def __init__(self, hard_deadline_s: float, exit_grace_s: float = EXIT_GRACE_S) -> None:
        self._hard_deadline = time.monotonic() + hard_deadline_s
        self._hard_deadline_s = hard_deadline_s
        self._exit_grace_s = exit_grace_s
        self._exit_by = self._hard_deadline
        self._code = 1
        self._stopped = threading.Event()
        threading.Thread(target=self._run, name="evaltrace-worker-exit-watchdog", daemon=True).start()

    def stopped(self, code: int) -> None:
        """The worker has stopped; the process should now exit with ``code`` within the exit grace."""
        self._code = code
        self._exit_by = min(self._hard_deadline, time.monotonic() + self._exit_grace_s)
        self._stopped.set()

    def _run(self) -> None:
        if self._stopped.wait(max(0.0, self._hard_deadline - time.monotonic())):
            time.sleep(max(0.0, self._exit_by - time.monotonic()))
            main = threading.main_thread()
            held = [t.name for t in threading.enumerate() if not t.daemon and t is not main and t.is_alive()]
            message = (
                f"evaltrace worker: stopped, but exit was held past {self._exit_grace_s:g}s by non-daemon "
                f"thread(s) {', '.join(held) or '(none found: an atexit handler?)'}; exiting now"
            )
            code = self._code
        else:
            message = (
                f"evaltrace worker: did not finish stopping within {self._hard_deadline_s:g}s; exiting now "
                "(spans or scores not yet drained are lost)"
            )
            code = 1
        # Said from a thread of its own and waited for briefly: stderr may be a pipe nobody reads any more, or
        # the main thread may be blocked writing to it, and nothing may keep the exit below from happening.
        say = threading.Thread(target=_say, args=(message,), name="evaltrace-worker-exit-message", daemon=True)
        say.start()
        say.join(0.5)
        os._exit(code)


def _say(message: str) -> None:
    try:
        print(message, file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed or broken stderr: the exit code still tells
        pass


def run_worker(args: argparse.Namespace) -> int:
    """Start the worker and serve until SIGINT/SIGTERM, then exit the process with 0 once stopped.

    Returns:
        2 on a configuration error (the worker never started).
    """
    from evaltrace.worker import EvaluationWorker, build_exporters, build_sinks, load_evaluators

    local_store = args.local_store
    if local_store is None and args.otlp_endpoint is None:
        local_store = ".evaltrace"
    try:
        auth, tls = _access(args)
        if (warning := exposure_warning(args.host, auth)) is not None:  # said first: the worst setting to miss
            print(f"evaltrace worker: {warning}", file=sys.stderr, flush=True)
        limits = ReceiverLimits(
            max_body_bytes=args.max_body_size,
            max_connections=args.max_connections,
            idle_timeout_s=args.idle_timeout,
            request_timeout_s=args.request_timeout,
            max_inflight_bytes=args.max_inflight_bytes,
            max_json_depth=args.max_json_depth,
        )
        evaluators = load_evaluators(args.evaluators or [DEFAULT_EVALUATORS])
        sinks = build_sinks(args.sink)
        exporters = build_exporters(args.otlp_endpoint, args.protocol, args.headers, local_store)
        worker = EvaluationWorker(
            evaluators,
            sinks,
            exporters,
            host=args.host,
            port=args.port,
            grpc_port=args.grpc_port,
            max_inflight_spans=args.max_inflight,
            retry_after_s=args.retry_after,
            evaluation_options=_evaluation_options(args),
            limits=limits,
            auth=auth,
            tls=tls,
        )
    except (ConfigError, OSError) as exc:
        print(clean(f"evaltrace worker: {exc}"), file=sys.stderr)
        return 2
    worker.install_signal_handlers()  # before the port answers: a supervisor may signal from then on
    worker.start()
    grpc = f", OTLP/gRPC on {args.host}:{worker.grpc.port}" if worker.grpc is not None else ""
    print(
        f"evaltrace worker: OTLP/HTTP on {worker.url}/v1/traces{grpc}; {len(evaluators)} evaluator(s), "
        f"{len(sinks)} sink(s), {len(exporters)} exporter(s)",
        file=sys.stderr,
        flush=True,
    )
    signum = worker.wait_for_signal()
    watchdog = ExitWatchdog(args.shutdown_timeout + WATCHDOG_MARGIN_S)
    cause = signal.Signals(signum).name if signum is not None else "stop"
    print(f"evaltrace worker: {cause}, stopping (deadline {args.shutdown_timeout:g}s)", file=sys.stderr, flush=True)
    started = time.monotonic()
    worker.stop(args.shutdown_timeout)
    watchdog.stopped(0)
    print(
        f"evaltrace worker: stopped in {time.monotonic() - started:.1f}s; {_summary(worker.stats())}", file=sys.stderr
    )
    # Everything is drained or counted: exit now. Evaluations cut off at the deadline may still be running on
    # daemon threads (a sync evaluator cannot be interrupted), and interpreter finalization stops such a thread
    # wherever it is: inside a native extension that catches the unwinding, that aborts the process (exit -6,
    # "FATAL: exception not rethrown", seen at SIGTERM under load) after a clean drain.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _evaluation_options(args: argparse.Namespace) -> dict[str, Any]:
    """The processor options the flags set (an invalid value is the processor's ConfigError, naming it)."""
    options: dict[str, Any] = {"hold_timeout_s": args.hold_timeout}
    if args.session_quiet_period is not None:
        options["session_quiet_period_s"] = args.session_quiet_period
    if args.redis_url:
        options["redis_url"] = args.redis_url
    return options


def _summary(stats: dict[str, Any]) -> str:
    """One line of what the stop left behind (read defensively: a missing counter reads 0)."""
    evaluation = stats.get("evaluation", {})
    dead = sum(s.get("dead_lettered", 0) for s in evaluation.get("sinks", {}).values())
    lost = sum(e.get("lost", 0) for e in evaluation.get("exporters", {}).values())
    return (
        f"{stats.get('accepted_spans', 0)} span(s) accepted, {stats.get('refused_spans', 0)} refused; "
        f"{evaluation.get('unflushed_jobs', 0)} evaluation(s) cut off at the deadline, "
        f"{dead} score(s) dead-lettered, {lost} span(s) lost in export; "
        f"{stats.get('undelivered_spans', 0)} acknowledged span(s) not delivered"
    )
