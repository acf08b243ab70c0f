"""collector/: every pipeline references defined components, and docker-compose agrees with the configs.

No collector binary runs on these machines (../shared/docs/backends-here.md section 3), so this checks the
wiring statically; ``otelcol-contrib validate --config=...`` is the full check where the binary exists.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

COLLECTOR = Path(__file__).resolve().parent.parent / "collector"
CONFIGS = ["otelcol.yaml", "otelcol-eval.yaml"]
SECTIONS = ("receivers", "processors", "exporters", "connectors")
JAEGER_IMAGE = "cr.jaegertracing.io/jaegertracing/jaeger:2.20.0"
COLLECTOR_IMAGE = re.compile(r"^otel/opentelemetry-collector-contrib:\d+\.\d+\.\d+$")
# Ports the Jaeger v2 all-in-one image listens on (conventions.md 5.1).
JAEGER_PORTS = {4317, 4318, 16686, 13133, 5778, 9411}


def load(name: str) -> dict[str, Any]:
    data = yaml.safe_load((COLLECTOR / name).read_text())
    assert isinstance(data, dict)
    return data


def compose() -> dict[str, Any]:
    return load("docker-compose.yml")


def port_of(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1].split("/")[0])


def host_of(endpoint: str) -> str:
    return endpoint.split("://")[-1].rsplit(":", 1)[0]


def service_for(config: str) -> tuple[str, dict[str, Any]]:
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
                assert component in (data.get(section) or {}), f"{name} uses undefined {section[:-1]} {component}"
                used[section].add(component)
        processors = pipeline.get("processors", [])
        assert processors and processors[0] == "memory_limiter", f"{name}: memory_limiter must come first"
    for section in ("receivers", "processors", "exporters"):
        assert set(data.get(section) or {}) == used[section], f"defined but unused {section}"
    for extension in data["service"].get("extensions", []):
        assert extension in data["extensions"]


@pytest.mark.parametrize("config", CONFIGS)
def test_exporters_retry_queue_and_langfuse_auth(config: str) -> None:
    exporters = load(config)["exporters"]
    for name, exporter in exporters.items():
        settings = exporter["protocol"]["otlp"] if name.startswith("loadbalancing") else exporter
        assert settings["retry_on_failure"]["enabled"] is True, name
        assert settings["sending_queue"]["enabled"] is True, name
    langfuse = exporters["otlp_http/langfuse"]
    assert langfuse["endpoint"].endswith("/api/public/otel")  # otlp_http appends /v1/traces
    assert langfuse["headers"]["Authorization"] == "Basic ${env:LANGFUSE_AUTH}"
    assert langfuse["headers"]["x-langfuse-ingestion-version"] == "4"
    assert exporters["otlp_grpc/jaeger"]["endpoint"] == "jaeger:4317"


def test_evaluation_routes_whole_traces_to_the_workers() -> None:
    data = load("otelcol-eval.yaml")
    balancer = data["exporters"]["loadbalancing/workers"]
    assert balancer["routing_key"] == "traceID"
    assert "endpoint" not in balancer["protocol"]["otlp"]
    services = compose()["services"]
    for hostname in balancer["resolver"]["static"]["hostnames"]:
        worker = services[host_of(hostname)]
        assert worker["profiles"] == ["eval"]
        assert port_of(hostname) == int(option(worker["command"], "--grpc-port"))
        back = option(worker["command"], "--otlp-endpoint")
        eval_service, _ = service_for("otelcol-eval.yaml")
        assert host_of(back) == eval_service
        assert option(worker["command"], "--protocol") == "grpc"
        enriched = data["receivers"]["otlp/enriched"]["protocols"]["grpc"]["endpoint"]
        assert port_of(back) == port_of(enriched)
    raw = data["service"]["pipelines"]["traces/evaluate"]
    assert raw["exporters"] == ["loadbalancing/workers"]
    assert "otlp/enriched" not in raw["receivers"], "enriched spans must not loop back to the workers"


@pytest.mark.parametrize("config", CONFIGS)
def test_compose_publishes_the_receiver_ports_and_mounts_the_config(config: str) -> None:
    name, service = service_for(config)
    assert COLLECTOR_IMAGE.match(service["image"]), service["image"]
    assert "--config=/etc/otelcol-contrib/config.yaml" in service["command"]
    assert f"./{config}:/etc/otelcol-contrib/config.yaml:ro" in service["volumes"]
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
    assert service["environment"]["LANGFUSE_AUTH"] == "${LANGFUSE_AUTH:-}"


def test_compose_images_and_unique_host_ports() -> None:
    services = compose()["services"]
    assert services["jaeger"]["image"] == JAEGER_IMAGE
    images = {s["image"] for n, s in services.items() if n.startswith("collector")}
    assert len(images) == 1, "both collectors should run the same version"
    host_ports = [p.split(":")[0] for s in services.values() for p in s.get("ports", [])]
    assert len(host_ports) == len(set(host_ports)), "two services publish the same host port"
    dockerfile = COLLECTOR / services["worker-1"]["build"]["dockerfile"].removeprefix("collector/")
    assert dockerfile.is_file()
    assert 'ENTRYPOINT ["evaltrace", "worker"]' in dockerfile.read_text()
