r"""``evaltrace worker``: evaluate spans out of process (OTLP in, enriched spans and scores out).

Example (Jaeger receives the enriched spans, scores go to a JSONL file and to Langfuse)::

    evaltrace worker --port 4318 --evaluators mypkg.evals:EVALUATORS \
        --otlp-endpoint http://jaeger:4318 --sink jsonl:scores.jsonl --sink langfuse
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from evaltrace.exceptions import ConfigError

DEFAULT_EVALUATORS = "evaltrace.worker.defaults:EVALUATORS"


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
    worker.add_argument("--max-inflight", type=int, default=4096, help="spans in flight before answering 503")
    worker.add_argument("--hold-timeout", type=float, default=10.0, help="seconds a span may wait for its scores")
    worker.add_argument("--retry-after", type=int, default=1, help="Retry-After seconds sent with 503")
    worker.set_defaults(func=run_worker)


def run_worker(args: argparse.Namespace) -> int:
    """Start the worker and serve until SIGINT/SIGTERM; exit code 2 on a configuration error."""
    from evaltrace.worker import EvaluationWorker, build_exporters, build_sinks, load_evaluators

    local_store = args.local_store
    if local_store is None and args.otlp_endpoint is None:
        local_store = ".evaltrace"
    try:
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
            evaluation_options={"hold_timeout_s": args.hold_timeout},
        )
    except (ConfigError, OSError) as exc:
        print(f"evaltrace worker: {exc}", file=sys.stderr)
        return 2
    worker.start()
    grpc = f", OTLP/gRPC on {args.host}:{worker.grpc.port}" if worker.grpc is not None else ""
    print(
        f"evaltrace worker: OTLP/HTTP on {worker.url}/v1/traces{grpc}; {len(evaluators)} evaluator(s), "
        f"{len(sinks)} sink(s), {len(exporters)} exporter(s)",
        file=sys.stderr,
        flush=True,
    )
    worker.wait()
    return 0
