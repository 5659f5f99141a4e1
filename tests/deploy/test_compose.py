"""The docker-compose deployment, checked without Docker.

There is no Docker engine in CI, so these tests check what can be checked statically: the compose file
against the Compose specification's JSON schema (vendored by check-jsonschema), the wiring between
services (health checks, depends_on, mounted files), the memstream environment against the real
Settings, the collector, Prometheus and Grafana files against each other, the dashboard's PromQL
against the metric names memstream exports, and the Dockerfile's runtime contract. The health-check
commands that can run here (bash /dev/tcp for Qdrant, python for memstream) are run against a local
HTTP server.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import fields
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

import jsonschema
import pytest
import yaml

from memstream.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
DEPLOY = ROOT / "deploy"

EXPECTED_SERVICES = {"kafka", "qdrant", "otel-collector", "jaeger", "prometheus", "grafana", "worker", "api"}
MEMSTREAM_SERVICES = ("worker", "api")

#: The metrics memstream exports (the contract the dashboard is built on). A histogram's series
#: (_bucket, _sum, _count) are listed one by one.
CONTRACT_METRICS = {
    "memstream_events_processed_total",
    "memstream_events_failed_total",
    "memstream_dead_letters_total",
    "memstream_consumer_lag",
    "memstream_llm_calls_total",
    "memstream_llm_tokens_total",
    "memstream_llm_cost_usd_total",
    "memstream_stage_seconds_bucket",
    "memstream_stage_seconds_sum",
    "memstream_stage_seconds_count",
    "memstream_health_score",
    "memstream_health_delta",
    "memstream_repairs_total",
}

#: Environment names a memstream container may carry besides Settings' own variables.
OTEL_SDK_PREFIX = "OTEL_"

SETTINGS_ENV = {f.metadata["env"] for f in fields(Settings)}


# --- loading ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    # safe_load resolves the x-memstream anchors and `<<` merge keys, as Compose does.
    return yaml.safe_load(COMPOSE_FILE.read_text())


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


@pytest.fixture(scope="module")
def collector() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "otel-collector.yaml").read_text())


@pytest.fixture(scope="module")
def prometheus() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "prometheus.yml").read_text())


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return json.loads((DEPLOY / "grafana" / "dashboards" / "memstream.json").read_text())


def compose_schema() -> dict[str, Any]:
    schema_file = resources.files("check_jsonschema.builtin_schemas.vendor").joinpath("compose-spec.json")
    return json.loads(schema_file.read_text(encoding="utf-8"))


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {name: "" if value is None else str(value) for name, value in env.items()}


_INTERPOLATION = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::?-(?P<default>[^}]*))?\}")


def interpolate(value: str, host_env: dict[str, str] | None = None) -> str:
    """Compose's `${NAME:-default}` substitution (enough of it for this file); `$$` is a literal `$`."""
    host_env = host_env or {}
    out = _INTERPOLATION.sub(lambda m: host_env.get(m["name"]) or (m["default"] or ""), value.replace("$$", "\0"))
    return out.replace("\0", "$")


def bind_mounts(service: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(host source, container target) of every bind mount of a service."""
    for volume in service.get("volumes", []):
        if isinstance(volume, str):
            parts = volume.split(":")
            if parts[0].startswith((".", "/")):
                yield parts[0], parts[1]
        elif volume.get("type") == "bind":
            yield volume["source"], volume["target"]


def healthcheck_argv(service: dict[str, Any]) -> list[str]:
    test = service["healthcheck"]["test"]
    if isinstance(test, str):
        return ["/bin/sh", "-c", test]
    if test[0] == "CMD-SHELL":
        return ["/bin/sh", "-c", " ".join(test[1:])]
    assert test[0] == "CMD", test
    return list(test[1:])


# --- the compose file ------------------------------------------------------------------------------


def test_compose_file_is_valid_against_the_compose_spec(compose: dict[str, Any]) -> None:
    schema = compose_schema()
    validator_cls = jsonschema.validators.validator_for(schema)
    validator_cls.check_schema(schema)
    errors = sorted(validator_cls(schema).iter_errors(compose), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors)


def test_schema_check_catches_a_broken_file(compose: dict[str, Any]) -> None:
    # Guards against a schema that accepts anything (wrong file, empty schema).
    broken = json.loads(json.dumps(compose))
    broken["services"]["api"]["healthcheck"]["interval"] = ["not", "a", "duration"]
    broken["services"]["kafka"]["no_such_key"] = True
    schema = compose_schema()
    errors = list(jsonschema.validators.validator_for(schema)(schema).iter_errors(broken))
    assert len(errors) >= 2


def test_every_expected_service_exists(services: dict[str, Any]) -> None:
    missing = EXPECTED_SERVICES - set(services)
    assert not missing, f"missing services: {sorted(missing)}"


def test_every_service_has_a_healthcheck(services: dict[str, Any]) -> None:
    for name, service in services.items():
        check = service.get("healthcheck")
        assert check and check.get("test") and not check.get("disable"), f"{name} has no healthcheck"
        assert check["test"][0] in {"CMD", "CMD-SHELL"}, f"{name}: healthcheck test must be CMD or CMD-SHELL"
        for key in ("interval", "timeout", "retries"):
            assert key in check, f"{name}: healthcheck has no {key}"


def test_depends_on_waits_for_healthy_services_that_exist(services: dict[str, Any]) -> None:
    for name, service in services.items():
        depends_on = service.get("depends_on", {})
        assert isinstance(depends_on, dict), f"{name}: depends_on must be the long form with conditions"
        for dependency, spec in depends_on.items():
            assert dependency in services, f"{name} depends on unknown service {dependency!r}"
            assert dependency != name
            assert spec.get("condition") == "service_healthy", f"{name} -> {dependency} is not service_healthy"


def test_depends_on_has_no_cycle(services: dict[str, Any]) -> None:
    state: dict[str, str] = {}

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == "done":
            return
        assert state.get(name) != "visiting", f"dependency cycle: {' -> '.join([*path, name])}"
        state[name] = "visiting"
        for dependency in services[name].get("depends_on", {}):
            visit(dependency, [*path, name])
        state[name] = "done"

    for name in services:
        visit(name, [])


def test_memstream_services_wait_for_kafka_qdrant_and_the_collector(services: dict[str, Any]) -> None:
    for name in MEMSTREAM_SERVICES:
        assert {"kafka", "qdrant", "otel-collector"} <= set(services[name]["depends_on"]), name


def test_kafka_runs_in_kraft_mode(services: dict[str, Any]) -> None:
    for name, service in services.items():
        uses_zookeeper = "zookeeper" in name.lower() or "zookeeper" in str(service.get("image", "")).lower()
        assert not uses_zookeeper, f"service {name} is ZooKeeper: the broker must run in KRaft mode"
    kafka = services["kafka"]
    assert str(kafka["image"]).startswith("apache/kafka:")
    major, minor = (int(part) for part in kafka["image"].split(":", 1)[1].split(".")[:2])
    assert (major, minor) >= (3, 9), kafka["image"]
    env = environment(kafka)
    for zk_setting in ("KAFKA_ZOOKEEPER_CONNECT", "KAFKA_ZOOKEEPER_CONNECTION_TIMEOUT_MS"):
        assert zk_setting not in env
    roles = set(env.get("KAFKA_PROCESS_ROLES", "").split(","))
    assert roles == {"broker", "controller"}
    node_id = env["KAFKA_NODE_ID"]
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"].startswith(f"{node_id}@kafka:")
    controller = env["KAFKA_CONTROLLER_LISTENER_NAMES"]
    listeners = dict(item.split("://", 1) for item in env["KAFKA_LISTENERS"].split(","))
    advertised = dict(item.split("://", 1) for item in env["KAFKA_ADVERTISED_LISTENERS"].split(","))
    protocols = dict(item.split(":", 1) for item in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    assert controller in listeners and controller not in advertised
    assert set(listeners) <= set(protocols)
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"].endswith(":" + listeners[controller].rsplit(":", 1)[1])
    # In-network clients reach the broker at the address memstream is given.
    bootstrap = environment(services["worker"])["MEMSTREAM_KAFKA_BOOTSTRAP"]
    assert bootstrap in advertised.values()
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    assert env.get("CLUSTER_ID")
    assert env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == "1"


def test_kafka_healthcheck_lists_topics_through_the_bootstrap_server(services: dict[str, Any]) -> None:
    argv = " ".join(healthcheck_argv(services["kafka"]))
    assert "kafka-topics.sh" in argv and "--list" in argv and "--bootstrap-server" in argv


def test_kafka_and_qdrant_keep_data_in_named_volumes(compose: dict[str, Any], services: dict[str, Any]) -> None:
    named = set(compose.get("volumes") or {})
    for name, target in (("kafka", "/var/lib/kafka/data"), ("qdrant", "/qdrant/storage")):
        mounts = {v.split(":")[1]: v.split(":")[0] for v in services[name]["volumes"] if isinstance(v, str)}
        assert target in mounts, f"{name} does not mount {target}"
        assert mounts[target] in named, f"{name}'s {target} is not a named volume"
    assert environment(services["kafka"])["KAFKA_LOG_DIRS"] == "/var/lib/kafka/data"


def test_memstream_services_build_this_image_and_run_memstream_up(services: dict[str, Any]) -> None:
    for name in MEMSTREAM_SERVICES:
        service = services[name]
        build = service["build"]
        context = build if isinstance(build, str) else build.get("context", ".")
        assert (ROOT / context).resolve() == ROOT
    assert "command" not in services["worker"], "workers must use the image's CMD (memstream up)"
    # The API is query-only: it must not join the workers' consumer group.
    assert services["api"]["command"] == ["memstream", "api"]


def test_memstream_services_read_tokens_from_the_mounted_directory(services: dict[str, Any]) -> None:
    for name in MEMSTREAM_SERVICES:
        env = environment(services[name])
        mounts = dict(bind_mounts(services[name]))
        assert mounts["./deploy/tokens"] == "/etc/memstream/tokens", name
        assert env["MEMSTREAM_TOKENS_FILE"].startswith("/etc/memstream/tokens/"), name
        assert "MEMSTREAM_API_OPEN" not in env, f"{name}: an open API is for loopback only"
    assert (ROOT / "deploy/tokens/.gitignore").read_text().splitlines()[-2:] == ["*", "!.gitignore"]


def test_workers_scale_and_the_api_publishes_8765(services: dict[str, Any]) -> None:
    worker = services["worker"]
    assert worker.get("deploy", {}).get("replicas", 1) >= 2
    # Anything fixed per container would break `--scale worker=N`.
    assert "container_name" not in worker and "ports" not in worker and "hostname" not in worker
    api = services["api"]
    published = [str(p) for p in api.get("ports", [])]
    assert any(p.endswith(":8765") and "8765:8765" in p for p in published), published


def test_memstream_environment_names_real_settings(services: dict[str, Any]) -> None:
    for name in MEMSTREAM_SERVICES:
        env = environment(services[name])
        unknown = sorted(
            var
            for var in env
            if var not in SETTINGS_ENV and (var.startswith("MEMSTREAM_") or not var.startswith(OTEL_SDK_PREFIX))
        )
        assert not unknown, f"{name}: not memstream settings: {unknown}"


def test_memstream_environment_points_at_the_compose_services(services: dict[str, Any]) -> None:
    for name in MEMSTREAM_SERVICES:
        env = environment(services[name])
        assert env["MEMSTREAM_KAFKA_BOOTSTRAP"] == "kafka:9092"
        assert env["MEMSTREAM_QDRANT_URL"] == "http://qdrant:6333"
        assert env["MEMSTREAM_TRACE_EXPORTER"] == "otlp"
        assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://otel-collector:4318"
        assert env["MEMSTREAM_HTTP_HOST"] == "0.0.0.0"
        for key in ("ANTHROPIC_API_KEY", "XAI_API_KEY", "GOOGLE_API_KEY", "VOYAGE_API_KEY"):
            assert env.get(key) == f"${{{key}:-}}", f"{name}: {key} is not passed through from the host"


def test_memstream_environment_is_accepted_by_settings(services: dict[str, Any]) -> None:
    for name in MEMSTREAM_SERVICES:
        env = {var: interpolate(value) for var, value in environment(services[name]).items()}
        settings = Settings.from_env(env)
        assert settings.kafka_bootstrap == "kafka:9092" and not settings.embedded_broker
        assert settings.trace_exporter == "otlp"
        port = settings.http_port
        assert f"127.0.0.1:{port}/health" in " ".join(healthcheck_argv(services[name]))
    # The keys really come from the host when it has them.
    worker_env = environment(services["worker"])
    assert interpolate(worker_env["ANTHROPIC_API_KEY"], {"ANTHROPIC_API_KEY": "sk-test"}) == "sk-test"


def test_memstream_runs_up_directly_on_its_data_dir(services: dict[str, Any]) -> None:
    # A runtime file left by a killed container is recognised as stale by `memstream up` itself
    # (tests/unit/test_runtime_file.py), so no tmpfs or wrapper script is needed around it.
    for name in MEMSTREAM_SERVICES:
        assert "tmpfs" not in services[name], f"{name}: a tmpfs workaround for the runtime file is back"
        assert environment(services[name])["MEMSTREAM_DATA_DIR"] == "/var/lib/memstream"


def test_files_mounted_from_the_repository_exist(services: dict[str, Any]) -> None:
    mounted = 0
    for name, service in services.items():
        for source, _target in bind_mounts(service):
            assert (ROOT / source).resolve().exists(), f"{name} mounts missing {source}"
            assert (ROOT / source).resolve().is_relative_to(ROOT), f"{name} mounts {source} from outside the repo"
            mounted += 1
    assert mounted >= 4  # collector config, prometheus config, grafana provisioning and dashboards


def test_the_collector_and_prometheus_read_the_mounted_configs(services: dict[str, Any]) -> None:
    collector_mounts = dict(bind_mounts(services["otel-collector"]))
    config_target = collector_mounts["./deploy/otel-collector.yaml"]
    assert any(config_target in str(arg) for arg in services["otel-collector"]["command"])
    prom_mounts = dict(bind_mounts(services["prometheus"]))
    assert any(prom_mounts["./deploy/prometheus.yml"] in str(arg) for arg in services["prometheus"]["command"])


# --- health checks that can run here ---------------------------------------------------------------


class _Handler(http.server.BaseHTTPRequestHandler):
    #: Set per test on a subclass (see http_server): the status each path answers.
    status_by_path: ClassVar[dict[str, int]] = {}

    def do_GET(self) -> None:
        status = self.status_by_path.get(self.path.split("?")[0], 404)
        body = b"ok" if status == 200 else b"no"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[tuple[int, dict[str, int]]]:
    statuses: dict[str, int] = {}
    handler = type("Handler", (_Handler,), {"status_by_path": statuses})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], statuses
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_qdrant_healthcheck_needs_a_200_from_readyz(
    services: dict[str, Any], http_server: tuple[int, dict[str, int]]
) -> None:
    port, statuses = http_server
    argv = healthcheck_argv(services["qdrant"])
    assert argv[0] == "bash", "the qdrant image has bash but neither curl nor wget"
    assert "/readyz" in argv[-1]
    # Compose turns `$$` into `$` before running the command; point it at the local server.
    argv = [interpolate(arg).replace("127.0.0.1/6333", f"127.0.0.1/{port}") for arg in argv]
    statuses["/readyz"] = 200
    assert subprocess.run(argv, timeout=10).returncode == 0
    statuses["/readyz"] = 503
    assert subprocess.run(argv, timeout=10).returncode != 0


def test_memstream_healthcheck_command_probes_health(
    services: dict[str, Any], http_server: tuple[int, dict[str, int]]
) -> None:
    port, statuses = http_server
    argv = healthcheck_argv(services["api"])
    assert argv[0] == "python"
    argv = [sys.executable] + [arg.replace("127.0.0.1:8765", f"127.0.0.1:{port}") for arg in argv[1:]]
    statuses["/health"] = 200
    assert subprocess.run(argv, timeout=10).returncode == 0
    statuses["/health"] = 500
    assert subprocess.run(argv, timeout=10, capture_output=True).returncode != 0


# --- the collector, Prometheus and Grafana ---------------------------------------------------------


def test_collector_has_trace_and_metric_pipelines_of_defined_components(collector: dict[str, Any]) -> None:
    pipelines = collector["service"]["pipelines"]
    assert {"traces", "metrics"} <= set(pipelines)
    for pipeline_name, pipeline in pipelines.items():
        assert pipeline.get("receivers") and pipeline.get("exporters"), pipeline_name
        for kind in ("receivers", "processors", "exporters"):
            for component in pipeline.get(kind, []):
                assert component in (collector.get(kind) or {}), (
                    f"{pipeline_name}: {kind[:-1]} {component} is undefined"
                )
    for extension in collector["service"].get("extensions", []):
        assert extension in collector.get("extensions", {}), f"extension {extension} is undefined"
    otlp = collector["receivers"]["otlp"]["protocols"]
    assert otlp["grpc"]["endpoint"].endswith(":4317") and otlp["http"]["endpoint"].endswith(":4318")
    # memstream's OTLP/HTTP exporter reaches the http protocol.
    for pipeline in pipelines.values():
        assert "otlp" in pipeline["receivers"]


def test_collector_sends_traces_to_jaeger_and_exposes_metrics_for_prometheus(
    collector: dict[str, Any], services: dict[str, Any]
) -> None:
    exporters = collector["exporters"]
    traces = collector["service"]["pipelines"]["traces"]["exporters"]
    to_jaeger = [
        e for e in traces if e.split("/")[0] in {"otlp", "otlp_grpc"} and "jaeger:4317" in exporters[e]["endpoint"]
    ]
    assert to_jaeger, "no OTLP exporter to jaeger:4317 in the traces pipeline"
    assert "jaeger" in services
    metrics = collector["service"]["pipelines"]["metrics"]["exporters"]
    assert "prometheus" in metrics and exporters["prometheus"]["endpoint"].endswith(":8889")
    assert any(e.split("/")[0] == "debug" for e in traces) and any(e.split("/")[0] == "debug" for e in metrics)
    assert "batch" in collector["service"]["pipelines"]["traces"]["processors"]
    assert "batch" in collector["service"]["pipelines"]["metrics"]["processors"]


def _scrape_targets(prometheus: dict[str, Any]) -> dict[str, tuple[str, list[str]]]:
    jobs: dict[str, tuple[str, list[str]]] = {}
    for job in prometheus["scrape_configs"]:
        targets = [t for static in job.get("static_configs", []) for t in static["targets"]]
        targets += [f"{name}:{sd['port']}" for sd in job.get("dns_sd_configs", []) for name in sd["names"]]
        jobs[job["job_name"]] = (job.get("metrics_path", "/metrics"), targets)
    return jobs


def test_prometheus_scrapes_memstream_and_the_collector(prometheus: dict[str, Any], services: dict[str, Any]) -> None:
    jobs = _scrape_targets(prometheus)
    scraped = {target: path for path, targets in jobs.values() for target in targets}
    for service in MEMSTREAM_SERVICES:
        assert scraped.get(f"{service}:8765") == "/metrics", f"memstream's {service} /metrics is not scraped"
    assert "otel-collector:8889" in scraped
    for target in scraped:
        host = target.rsplit(":", 1)[0]
        assert host in services or host == "localhost", f"scrape target {target} is not a compose service"


def _promql_metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression selects (functions, keywords, labels and durations removed)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', "", expr)  # string literals
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # range and subquery windows
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)  # label lists
    text = re.sub(r"\boffset\s+-?\w+", "", text)
    keywords = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless"}
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        token = match.group()
        is_call = text[match.end() :].lstrip().startswith("(")
        is_number = re.fullmatch(r"(?i)inf|nan|0x[0-9a-f]+|\d+e\d+", token) is not None
        if token in keywords or is_call or is_number:
            continue
        names.add(token)
    return names


def test_promql_name_extraction() -> None:
    assert _promql_metric_names('sum by (stage) (rate(a_total{stage="x", b=~"y"}[1m]))') == {"a_total"}
    assert _promql_metric_names(
        "histogram_quantile(0.99, sum by (stage, le) (rate(h_bucket[5m]))) / on(x) group_left(y) b offset 5m"
    ) == {"h_bucket", "b"}
    assert _promql_metric_names("rate(memstream_typo_total[5m]) * 3600") == {"memstream_typo_total"}


def _dashboard_panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])  # collapsed rows


def test_dashboard_queries_use_only_contract_metrics(dashboard: dict[str, Any]) -> None:
    assert 36 <= dashboard["schemaVersion"] <= 41
    assert dashboard.get("uid") and dashboard.get("title")
    used: set[str] = set()
    queries = 0
    for panel in _dashboard_panels(dashboard):
        if panel["type"] == "row":
            continue
        assert panel.get("targets"), f"panel {panel['title']!r} has no query"
        assert panel["datasource"]["uid"] == "prometheus"
        for target in panel["targets"]:
            names = _promql_metric_names(target["expr"])
            assert names, f"{panel['title']!r}: no metric in {target['expr']!r}"
            unknown = names - CONTRACT_METRICS
            assert not unknown, f"{panel['title']!r} queries metrics outside the contract: {sorted(unknown)}"
            used |= names
            queries += 1
    # Every contract metric has a panel (the histogram through its buckets).
    assert CONTRACT_METRICS - used <= {"memstream_stage_seconds_sum", "memstream_stage_seconds_count"}
    for template in dashboard.get("templating", {}).get("list", []):
        if template.get("type") == "query":
            assert _promql_metric_names(str(template.get("query", ""))) <= CONTRACT_METRICS
    assert queries >= 9


def test_dashboard_has_the_agreed_queries(dashboard: dict[str, Any]) -> None:
    exprs = {re.sub(r"\s+", " ", t["expr"]) for p in _dashboard_panels(dashboard) for t in p.get("targets", [])}
    for expected in (
        "sum by (stage) (rate(memstream_events_processed_total[1m]))",
        "sum by (stage) (rate(memstream_events_failed_total[1m]))",
        "rate(memstream_dead_letters_total[5m])",
        "sum by (topic) (memstream_consumer_lag)",
        "sum by (provider, outcome) (rate(memstream_llm_calls_total[5m]))",
        "sum by (provider, kind) (rate(memstream_llm_tokens_total[5m]))",
        "sum by (provider) (rate(memstream_llm_cost_usd_total[1h]))",
    ):
        assert expected in exprs, f"missing panel query {expected}"
    quantiles = [e for e in exprs if "memstream_stage_seconds_bucket" in e]
    assert any(e.startswith("histogram_quantile(0.5,") for e in quantiles)
    assert any(e.startswith("histogram_quantile(0.99,") for e in quantiles)
    assert all("le" in e for e in quantiles)


def test_dashboard_panels_do_not_overlap(dashboard: dict[str, Any]) -> None:
    ids = [p["id"] for p in _dashboard_panels(dashboard)]
    assert len(ids) == len(set(ids))
    cells: dict[tuple[int, int], str] = {}
    for panel in dashboard["panels"]:
        g = panel["gridPos"]
        assert g["x"] + g["w"] <= 24
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{panel['title']!r} overlaps {cells[(x, y)]!r}"
                cells[(x, y)] = panel["title"]


def test_grafana_provisions_the_datasources_and_the_dashboard(
    services: dict[str, Any], dashboard: dict[str, Any]
) -> None:
    provisioning = DEPLOY / "grafana" / "provisioning"
    sources = yaml.safe_load((provisioning / "datasources" / "datasources.yaml").read_text())["datasources"]
    by_type = {s["type"]: s for s in sources}
    assert by_type["prometheus"]["url"] == "http://prometheus:9090"
    assert by_type["jaeger"]["url"].startswith("http://jaeger:16686")
    uids = {s["uid"] for s in sources}
    for panel in _dashboard_panels(dashboard):
        if "datasource" in panel:
            assert panel["datasource"]["uid"] in uids

    providers = yaml.safe_load((provisioning / "dashboards" / "dashboards.yaml").read_text())["providers"]
    mounts = {Path(source).as_posix().lstrip("./"): target for source, target in bind_mounts(services["grafana"])}
    assert mounts["deploy/grafana/provisioning"] == "/etc/grafana/provisioning"
    dashboards_target = mounts["deploy/grafana/dashboards"]
    assert any(p["options"]["path"] == dashboards_target for p in providers)


# --- the Dockerfile --------------------------------------------------------------------------------


def _dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = pending + stripped
        pending = ""
        keyword, _, args = full.partition(" ")
        instructions.append((keyword.upper(), args.strip()))
    return instructions


def _final_stage(instructions: list[tuple[str, str]]) -> list[tuple[str, str]]:
    starts = [i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM"]
    assert starts, "no FROM"
    return instructions[starts[-1] :]


def test_dockerfile_runtime_contract() -> None:
    instructions = _dockerfile_instructions(DOCKERFILE.read_text())
    args = {a.split("=", 1)[0]: a.split("=", 1)[1] for k, a in instructions if k == "ARG" and "=" in a}
    bases = [
        re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m[1], m[0]), a.split()[0]) for k, a in instructions if k == "FROM"
    ]
    assert bases[-1].startswith("python:3.11-slim"), bases

    final = _final_stage(instructions)
    users = [a for k, a in final if k == "USER"]
    assert users, "the runtime stage sets no USER"
    user = users[-1].split(":")[0]
    assert user not in {"root", "0"}, "the container must not run as root"

    checks = [a for k, a in final if k == "HEALTHCHECK"]
    assert checks and "NONE" not in checks[-1].upper()
    assert "/health" in checks[-1] and "python" in checks[-1]

    cmds = [a for k, a in final if k == "CMD"]
    assert cmds, "no CMD"
    cmd = json.loads(cmds[-1]) if cmds[-1].startswith("[") else shlex.split(cmds[-1])
    assert cmd == ["memstream", "up"]
    assert not [a for k, a in final if k == "ENTRYPOINT"], "an ENTRYPOINT would change what CMD runs"

    assert any(k == "EXPOSE" and "8765" in a.split() for k, a in final)
    runs = " ".join(a for k, a in instructions if k == "RUN")
    assert re.search(r"pip install (?:[-\w=]+ )*\.(?:\s|$)", runs), "the project is not installed with pip install ."


def test_dockerfile_copies_every_package_the_project_installs() -> None:
    import tomllib

    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    # Each installed package comes from its mapped folder (memstream.agents from agents/), else its own.
    folders = {setuptools["package-dir"].get(name, name.replace(".", "/")) for name in setuptools["packages"]}
    packages = {folder.split("/")[0] for folder in folders}
    sources = {
        source.rstrip("/")
        for keyword, args in _dockerfile_instructions(DOCKERFILE.read_text())
        if keyword == "COPY" and not args.startswith("--from")
        for source in args.split()[:-1]
    }
    if "." not in sources:
        assert packages | {"pyproject.toml", "README.md"} <= sources, f"not copied: {sorted(packages - sources)}"


def test_dockerfile_healthcheck_command_works(http_server: tuple[int, dict[str, int]]) -> None:
    port, statuses = http_server
    check = [a for k, a in _final_stage(_dockerfile_instructions(DOCKERFILE.read_text())) if k == "HEALTHCHECK"][-1]
    command = check.split(" CMD ", 1)[1]
    argv = shlex.split(command)
    assert argv[0] == "python"
    env = {**os.environ, "MEMSTREAM_HTTP_PORT": str(port)}
    statuses["/health"] = 200
    assert subprocess.run([sys.executable, *argv[1:]], env=env, timeout=10).returncode == 0
    statuses["/health"] = 503
    assert subprocess.run([sys.executable, *argv[1:]], env=env, timeout=10, capture_output=True).returncode != 0


def test_dockerignore_keeps_local_state_out_of_the_build() -> None:
    ignored = {line.strip().rstrip("/") for line in (ROOT / ".dockerignore").read_text().splitlines()}
    assert {".venv", ".memstream", ".git", ".pytest_cache"} <= ignored
    # ...but not what the image is built from.
    for needed in ("pyproject.toml", "README.md", "memstream", "agents", "topics", "schemas"):
        assert needed not in ignored
