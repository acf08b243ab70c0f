"""collector/: every pipeline references defined components, and docker-compose agrees with the configs.

No collector binary runs on these machines (the project's notes on the backends available here, section 3), so this checks the
wiring statically, including each config as the collector merges it with the Langfuse overlay;
``otelcol-contrib validate --config=...`` runs as well where the binary is on PATH (never downloaded here).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

COLLECTOR = Path(__file__).resolve().parent.parent / "collector"
BASE_CONFIGS = ["otelcol.yaml", "otelcol-eval.yaml"]
OVERLAY = "otelcol-langfuse.yaml"
# Every config a user can run: each base alone (Jaeger only) and each with the Langfuse overlay.
CONFIGS = [*BASE_CONFIGS, *(f"{base}+{OVERLAY}" for base in BASE_CONFIGS)]
SECTIONS = ("receivers", "processors", "exporters", "connectors")
JAEGER_IMAGE = "cr.jaegertracing.io/jaegertracing/jaeger:2.20.0"
COLLECTOR_IMAGE = re.compile(r"^otel/opentelemetry-collector-contrib:\d+\.\d+\.\d+$")
# Ports the Jaeger v2 all-in-one image listens on (conventions.md 5.1).
JAEGER_PORTS = {4317, 4318, 16686, 13133, 5778, 9411}


def merge_config(base: Any, overlay: Any) -> Any:
    """Merge two collector configs as ``--config a --config b`` does: maps key by key, anything else replaced."""
    if isinstance(base, dict) and isinstance(overlay, dict):
        merged = dict(base)
        for key, value in overlay.items():
            merged[key] = merge_config(base[key], value) if key in base else value
        return merged
    return overlay


def load(name: str) -> dict[str, Any]:
    """One file, or files joined by ``+`` merged in order as the collector merges its ``--config`` files."""
    data: Any = {}
    for part in name.split("+"):
        data = merge_config(data, yaml.safe_load((COLLECTOR / part).read_text()))
    assert isinstance(data, dict)
    return data


def merge_compose(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Apply a compose override file as ``docker compose -f a -f b`` does, for the keys these files use.

    ``command`` is replaced, ``volumes`` are added (keyed by their container path), ``environment`` merges.
    """
    services = {name: dict(service) for name, service in base["services"].items()}
    for name, extra in override["services"].items():
        service = services.setdefault(name, {})
        for key, value in extra.items():
            if key == "volumes":
                targets = {v.split(":")[1]: v for v in service.get("volumes", [])}
                targets.update({v.split(":")[1]: v for v in value})
                service["volumes"] = list(targets.values())
            elif key == "environment":
                service["environment"] = {**service.get("environment", {}), **value}
            else:
                service[key] = value
    return {**base, "services": services}


def compose(*overrides: str) -> dict[str, Any]:
    data = load("docker-compose.yml")
    for override in overrides:
        data = merge_compose(data, load(override))
    return data


def port_of(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1].split("/")[0])


def host_of(endpoint: str) -> str:
    return endpoint.split("://")[-1].rsplit(":", 1)[0]


def service_for(config: str) -> tuple[str, dict[str, Any]]:
    """The compose service that runs base config ``config``."""
    for name, service in compose()["services"].items():
        if any(str(v).startswith(f"./{config}:") for v in service.get("volumes", [])):
            return name, service
    raise AssertionError(f"no compose service mounts {config}")


def option(command: list[str], flag: str) -> str:
    for arg in command:
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    raise AssertionError(f"{flag} missing from {command}")


@pytest.mark.parametrize("config", CONFIGS)
def test_every_pipeline_references_defined_components(config: str) -> None:
    data = load(config)
    pipelines = data["service"]["pipelines"]
    assert pipelines
    used: dict[str, set[str]] = {section: set() for section in SECTIONS}
    for name, pipeline in pipelines.items():
        assert name.split("/")[0] == "traces"
        assert pipeline["receivers"] and pipeline["exporters"], name
        for section in ("receivers", "processors", "exporters"):
            for component in pipeline.get(section, []):
                # A connector is an exporter of one pipeline and a receiver of another.
                home = (
                    "connectors" if section != "processors" and component in (data.get("connectors") or {}) else section
                )
                assert component in (data.get(home) or {}), f"{name} uses undefined {section[:-1]} {component}"
                used[home].add(component)
        processors = pipeline.get("processors", [])
        assert processors and processors[0] == "memory_limiter", f"{name}: memory_limiter must come first"
    for section in SECTIONS:
        assert set(data.get(section) or {}) == used[section], f"defined but unused {section}"
    for extension in data["service"].get("extensions", []):
        assert extension in data["extensions"]


@pytest.mark.parametrize("config", CONFIGS)
def test_exporters_retry_queue_and_langfuse_auth(config: str) -> None:
    exporters = load(config)["exporters"]
    for name, exporter in exporters.items():
        assert exporter["retry_on_failure"]["enabled"] is True, name
        assert exporter["sending_queue"]["enabled"] is True, name
    assert exporters["otlp_grpc/jaeger"]["endpoint"] == "jaeger:4317"
    if OVERLAY not in config:
        return
    langfuse = exporters["otlp_http/langfuse"]
    assert langfuse["endpoint"].endswith("/api/public/otel")  # otlp_http appends /v1/traces
    assert langfuse["headers"]["Authorization"] == "Basic ${env:LANGFUSE_AUTH}"
    assert langfuse["headers"]["x-langfuse-ingestion-version"] == "4"


@pytest.mark.parametrize("config", BASE_CONFIGS)
def test_a_jaeger_only_config_has_no_langfuse_leg(config: str) -> None:
    # Without credentials a Langfuse exporter could only fail (401 on every batch, retried for 5 minutes).
    assert "langfuse" not in yaml.safe_dump(load(config)).lower()
    merged = load(f"{config}+{OVERLAY}")
    pipelines = merged["service"]["pipelines"]
    viewers = pipelines["traces/viewers"]
    # The viewers' spans fork to Jaeger and, through a connector, to Langfuse's own pipeline.
    assert viewers["exporters"] == ["otlp_grpc/jaeger", "forward/langfuse"]
    assert viewers["receivers"] == load(config)["service"]["pipelines"]["traces/viewers"]["receivers"]
    assert set(pipelines) == {*load(config)["service"]["pipelines"], "traces/langfuse"}
    langfuse = pipelines["traces/langfuse"]
    assert (langfuse["receivers"], langfuse["exporters"]) == (["forward/langfuse"], ["otlp_http/langfuse"])
    assert "forward/langfuse" in merged["connectors"]


def test_langfuse_gets_llm_messages_not_their_one_line_list_values() -> None:
    # Langfuse reads input.value before gen_ai.input.messages (conventions.md 4.2): as the application's own
    # Langfuse exporter does (exporters/langfuse_view.py), the collector drops the list values where the messages
    # are present, and nowhere else.
    merged = load(f"otelcol.yaml+{OVERLAY}")
    assert "transform/langfuse_view" in merged["service"]["pipelines"]["traces/langfuse"]["processors"]
    (group,) = merged["processors"]["transform/langfuse_view"]["trace_statements"]
    assert group["context"] == "span"
    dropped = {}
    for statement in group["statements"]:
        found = re.fullmatch(r'delete_key\(attributes, "([\w.]+)"\) where attributes\["([\w.]+)"\] != nil', statement)
        assert found, statement
        dropped[found.group(1)] = found.group(2)
    assert dropped == {
        "input.value": "gen_ai.input.messages",
        "input.mime_type": "gen_ai.input.messages",
        "output.value": "gen_ai.output.messages",
        "output.mime_type": "gen_ai.output.messages",
    }


def test_load_balancer_retries_and_queues_at_the_top_level() -> None:
    # Top-level retry runs routing again, so a batch that failed on a worker the resolver has dropped goes to a
    # healthy one; the per-worker OTLP exporter must not keep (and retry) it on the failed worker instead.
    balancer = load("otelcol-eval.yaml")["exporters"]["loadbalancing/workers"]
    otlp = balancer["protocol"]["otlp"]
    assert otlp["retry_on_failure"]["enabled"] is False
    assert otlp["sending_queue"]["enabled"] is False
    assert set(balancer["resolver"]) == {"dns"}, "a static list never drops a failed worker, so nothing re-routes"


def test_evaluation_routes_whole_traces_to_the_workers() -> None:
    data = load("otelcol-eval.yaml")
    balancer = data["exporters"]["loadbalancing/workers"]
    assert balancer["routing_key"] == "traceID"
    assert "endpoint" not in balancer["protocol"]["otlp"]
    dns = balancer["resolver"]["dns"]
    worker = compose()["services"][dns["hostname"]]
    assert worker["profiles"] == ["eval"]
    assert worker["deploy"]["replicas"] >= 2
    assert dns["port"] == int(option(worker["command"], "--grpc-port"))
    back = option(worker["command"], "--otlp-endpoint")
    eval_service, _ = service_for("otelcol-eval.yaml")
    assert host_of(back) == eval_service
    assert option(worker["command"], "--protocol") == "grpc"
    enriched = data["receivers"]["otlp/enriched"]["protocols"]["grpc"]["endpoint"]
    assert port_of(back) == port_of(enriched)
    raw = data["service"]["pipelines"]["traces/evaluate"]
    assert raw["exporters"] == ["loadbalancing/workers"]
    assert "otlp/enriched" not in raw["receivers"], "enriched spans must not loop back to the workers"


@pytest.mark.parametrize("config", BASE_CONFIGS)
def test_compose_publishes_the_receiver_ports_and_mounts_the_config(config: str) -> None:
    name, service = service_for(config)
    assert COLLECTOR_IMAGE.match(service["image"]), service["image"]
    assert service["command"] == ["--config=/etc/otelcol-contrib/config.yaml"]
    assert f"./{config}:/etc/otelcol-contrib/config.yaml:ro" in service["volumes"]
    assert "environment" not in service, "the Jaeger-only setup needs no Langfuse credentials"
    container_ports = {int(p.split(":")[1]) for p in service["ports"]}
    data = load(config)
    otlp = data["receivers"]["otlp"]["protocols"]
    for protocol in ("grpc", "http"):
        endpoint = otlp[protocol]["endpoint"]
        assert endpoint.startswith("0.0.0.0:"), "a collector in a container must listen on all interfaces"
        assert port_of(endpoint) in container_ports, f"{name} does not publish {endpoint}"
    assert port_of(data["extensions"]["health_check"]["endpoint"]) in container_ports
    for exporter in data["exporters"].values():
        endpoint = exporter.get("endpoint", "")
        if endpoint.startswith("jaeger:"):
            assert port_of(endpoint) in JAEGER_PORTS
    assert set(service["depends_on"]) >= {"jaeger"}


@pytest.mark.parametrize("config", BASE_CONFIGS)
def test_compose_langfuse_override_loads_the_overlay_on_each_collector(config: str) -> None:
    name, _ = service_for(config)
    service = compose("docker-compose.langfuse.yml")["services"][name]
    mounts = {v.split(":")[1]: v.split(":")[0] for v in service["volumes"]}
    configs = [arg.removeprefix("--config=") for arg in service["command"]]
    assert [mounts[path] for path in configs] == [f"./{config}", f"./{OVERLAY}"], "base first, overlay over it"
    assert service["environment"]["LANGFUSE_AUTH"].startswith("${LANGFUSE_AUTH:?"), "no credentials: refuse to start"


@pytest.mark.skipif(shutil.which("otelcol-contrib") is None, reason="otelcol-contrib is not installed")
@pytest.mark.parametrize("config", CONFIGS)
def test_otelcol_contrib_validates(config: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGFUSE_AUTH", "cGstbGYtOnNrLWxmLQ==")
    args = [f"--config={COLLECTOR / part}" for part in config.split("+")]
    result = subprocess.run(
        ["otelcol-contrib", "validate", *args], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr


def test_compose_images_and_unique_host_ports() -> None:
    services = compose()["services"]
    assert services["jaeger"]["image"] == JAEGER_IMAGE
    images = {s["image"] for n, s in services.items() if n.startswith("collector")}
    assert len(images) == 1, "both collectors should run the same version"
    host_ports = [p.split(":")[0] for s in services.values() for p in s.get("ports", [])]
    assert len(host_ports) == len(set(host_ports)), "two services publish the same host port"
    dockerfile = COLLECTOR / services["worker"]["build"]["dockerfile"].removeprefix("collector/")
    assert dockerfile.is_file()
    assert 'ENTRYPOINT ["evaltrace", "worker"]' in dockerfile.read_text()
