"""``evaltrace worker`` as a process: serves until SIGTERM, writes enriched spans, refuses bad settings."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult
from test_worker import TRACE_ID, make_spans
from worker_process import refusals, start_worker

from evaltrace.exporters import LocalTraceStore
from evaltrace.worker import build_sinks, load_evaluators


def test_worker_process_evaluates_into_the_local_store_and_stops_on_sigterm(tmp_path: Path) -> None:
    worker = start_worker(
        tmp_path, "--local-store", str(tmp_path / "store"), "--sink", f"jsonl:{tmp_path / 'scores.jsonl'}",
        "--hold-timeout", "5",
    )  # fmt: skip
    try:
        url = worker.wait_ready()
        assert "4 evaluator(s), 1 sink(s), 1 exporter(s)" in worker.output()  # the default evaluators
        exporter = OTLPSpanExporter(endpoint=url + "/v1/traces")
        assert exporter.export(make_spans()) is SpanExportResult.SUCCESS
        exporter.shutdown()
        assert worker.stop() == 0
    finally:
        worker.kill()
    # Read once, without polling: the worker exited, so whatever it drained is on disk now.
    spans = LocalTraceStore(tmp_path / "store").spans(format(TRACE_ID, "032x")[:8])
    # The default trace-level evaluators report as child spans once the trace is complete (here: at the stop).
    evaluations = {"evaluation agent_sanity", "evaluation looping_detection"}
    assert {s.name for s in spans} == {"invoke_agent remote", "chat gpt-4o-mini", *evaluations}
    root = next(s for s in spans if s.name == "invoke_agent remote")
    evaluated = {k for k in (root.attributes or {}) if k.startswith("evaltrace.eval.")}
    assert "evaltrace.eval.pii_leakage.passed" in evaluated


BAD_EVALUATORS = ["--evaluators", "no_such_module_xyz:EVALS"]
BAD_ACCESS_AND_LIMITS = [
    (["--tls-cert", "cert.pem"], "--tls-cert and --tls-key go together"),
    (["--tls-cert", "cert.pem", "--tls-key", "key.pem"], "'tls_cert': file 'cert.pem' does not exist"),
    (["--max-body-size", "lots"], "'lots' is not a size"),
    (["--max-connections", "0"], "'max_connections': must be a positive integer"),
    (["--max-inflight", "0"], "'max_inflight_spans': must be a positive integer"),
    (["--auth-token", ""], "'auth_token': must be a non-empty string"),
    (["--redis-url", "http://127.0.0.1:6379"], "'redis_url': expected a redis://, rediss:// or unix:// URL"),
    (["--host", "0.0.0.0", "--evaluators", "no_such_module_xyz:E"], "WARNING: listening on 0.0.0.0 without"),
]


@pytest.fixture(scope="module")
def refused(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, ...], tuple[int | None, str]]:
    """(exit status, stderr) of ``evaltrace worker --port 0 ARGS`` for every refused ARGS of this module.

    Each ARGS runs in a process of its own, forked after the command's imports (``worker_process.refusals``): one
    import for the module's nine processes instead of nine. The tests that read it share an xdist group, so that
    one worker runs them all.
    """
    cases = [BAD_EVALUATORS, *(args for args, _ in BAD_ACCESS_AND_LIMITS)]
    found = refusals(tmp_path_factory.mktemp("refusals"), cases)
    return {tuple(args): result for args, result in zip(cases, found, strict=True)}


@pytest.mark.xdist_group("worker_cli_refusals")
def test_bad_settings_exit_2_with_the_reason(refused: dict[tuple[str, ...], tuple[int | None, str]]) -> None:
    status, stderr = refused[tuple(BAD_EVALUATORS)]
    assert status == 2
    assert "cannot import 'no_such_module_xyz'" in stderr


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("evaltrace.worker.defaults", "expected 'package.module:NAME'"),
        ("evaltrace.worker.defaults:MISSING", "has no attribute 'MISSING'"),
        ("evaltrace.worker.defaults:annotations", "is not an evaluator"),
    ],
)
def test_evaluator_paths_are_validated(path: str, message: str) -> None:
    from evaltrace.exceptions import ConfigError

    with pytest.raises(ConfigError, match=message):
        load_evaluators([path])


def test_evaluators_load_as_list_single_or_factory() -> None:
    assert len(load_evaluators(["evaltrace.worker.defaults:EVALUATORS"])) == 4
    assert [e.name for e in load_evaluators(["evaltrace.evaluators:NoPII"])] == ["pii_leakage"]  # a factory (class)


def test_sink_specs(tmp_path: Path) -> None:
    from evaltrace.exceptions import ConfigError

    (jsonl, phoenix) = build_sinks([f"jsonl:{tmp_path / 's.jsonl'}", "phoenix:http://127.0.0.1:6006"])
    assert (jsonl.name, phoenix.name) == ("jsonl", "phoenix")
    phoenix.shutdown()
    with pytest.raises(ConfigError, match="unknown sink"):
        build_sinks(["kafka"])


def test_worker_process_takes_its_token_from_the_environment_and_its_limits_from_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALTRACE_WORKER_TOKEN", "from-env")
    worker = start_worker(
        tmp_path, "--max-body-size", "1KiB", "--idle-timeout", "0.5", "--max-inflight-bytes", "2MiB",
        "--max-inflight", "100",
    )  # fmt: skip
    try:
        url = worker.wait_ready() + "/v1/traces"  # /healthz answers without the token
        health = httpx.get(worker.url + "/healthz").json()
        assert (health["max_inflight_bytes"], health["max_inflight_spans"]) == (2 * 1024 * 1024, 100)
        protobuf = {"Content-Type": "application/x-protobuf"}
        token = {**protobuf, "Authorization": "Bearer from-env"}
        assert httpx.post(url, content=b"", headers=protobuf).status_code == 401
        assert httpx.post(url, content=b"\x00" * 2048, headers=token).status_code == 413
        assert httpx.post(url, content=b"", headers=token).status_code == 200
        with socket.create_connection(("127.0.0.1", httpx.URL(url).port or 0), timeout=20) as idle:
            assert idle.recv(1) == b""  # closed by the worker after --idle-timeout
        assert worker.stop() == 0
    finally:
        worker.kill()


@pytest.mark.xdist_group("worker_cli_refusals")
@pytest.mark.parametrize(("args", "message"), BAD_ACCESS_AND_LIMITS)
def test_bad_access_and_limit_settings_exit_2_naming_them(
    refused: dict[tuple[str, ...], tuple[int | None, str]], args: list[str], message: str
) -> None:
    status, stderr = refused[tuple(args)]
    assert status == 2
    assert message in stderr
