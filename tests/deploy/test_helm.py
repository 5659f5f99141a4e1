"""The Helm chart in helm/memstream, rendered offline by the real Helm engine.

helm_python binds libhelm_c (Helm v4's Go SDK behind a C ABI), so this is ``helm template`` without a
helm binary or a cluster. Every rendered manifest is parsed; core Kubernetes kinds are validated
against the Kubernetes JSON schemas that kubernetes-validate ships (strict: unknown fields fail);
the CRDs (KEDA ScaledObject, Prometheus Operator ServiceMonitor) are checked structurally.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
import yaml

helm = pytest.importorskip("helm_python")
kubernetes_validate = pytest.importorskip("kubernetes_validate")

from memstream.settings import Settings  # noqa: E402 - only once the optional deploy tools are known present

CHART_DIR = Path(__file__).resolve().parents[2] / "helm" / "memstream"
RELEASE = "mem"
NAMESPACE = "memory"
#: The newest Kubernetes version kubernetes-validate ships schemas for.
KUBE_VERSION = kubernetes_validate.latest_version()

SETTING_ENVS = {f.metadata["env"] for f in fields(Settings)}
SECRET_ENVS = {
    "ANTHROPIC_API_KEY",
    "XAI_API_KEY",
    "GOOGLE_API_KEY",
    "VOYAGE_API_KEY",
    "MEMSTREAM_QDRANT_API_KEY",
    "MEMSTREAM_KAFKA_SASL_PASSWORD",
}
#: A client's bearer token: a secret, and never set in a pod at all.
CLIENT_SECRET_ENVS = {"MEMSTREAM_TOKEN"}
NON_SECRET_ENVS = SETTING_ENVS - SECRET_ENVS - CLIENT_SECRET_ENVS
#: Custom resources: no schema in kubernetes-validate, checked structurally instead.
CRDS = {("keda.sh/v1alpha1", "ScaledObject"), ("monitoring.coreos.com/v1", "ServiceMonitor")}

WORKER = f"{RELEASE}-memstream-worker"
API = f"{RELEASE}-memstream-api"

SCENARIOS: dict[str, dict[str, Any]] = {
    "default": {},
    "keda": {"autoscaling": {"keda": {"enabled": True}}},
    "hpa": {"autoscaling": {"hpa": {"enabled": True}}},
    "servicemonitor": {"serviceMonitor": {"enabled": True}},
    "no-persistence": {"persistence": {"enabled": False}},
    # Everything at once that can be on together, with Secrets referenced and tracing on.
    "production": {
        "kafka": {
            "bootstrap": "kafka-0.kafka:9092,kafka-1.kafka:9092",
            "topicPrefix": "acme-mem",
            "partitions": 12,
            "securityProtocol": "SASL_SSL",
            "sasl": {"username": "memstream-worker", "passwordSecret": {"name": "memstream-kafka"}},
            "tls": {"caSecret": "kafka-ca"},
        },
        "qdrant": {"url": "https://qdrant.internal:6333", "apiKey": {"existingSecret": "qdrant-key"}},
        "providers": {"existingSecret": "memstream-providers"},
        "tracing": {"otlpEndpoint": "http://otel-collector:4318"},
        "logLevel": "warning",
        "autoscaling": {"keda": {"enabled": True}, "maxReplicas": 12},
        "serviceMonitor": {"enabled": True, "bearerTokenSecret": {"name": "memstream-metrics-token"}},
        "persistence": {"storageClass": "fast-ssd", "size": "20Gi"},
        "imagePullSecrets": [{"name": "registry"}],
        "config": {"MEMSTREAM_USER": "platform@acme.test", "MEMSTREAM_EMBED_BATCH": 128},
        "auth": {"tokens": {"existingSecret": "memstream-tokens"}},
    },
}


# --- rendering -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chart() -> Iterator[Any]:
    with helm.Chart.load(CHART_DIR) as loaded:
        yield loaded


def render(chart: Any, values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Render like ``helm template mem helm/memstream -n memory``; every manifest, parsed."""
    rendered = chart.render(values=values or {}, name=RELEASE, namespace=NAMESPACE, is_install=True)
    assert rendered, "the Helm engine rendered nothing"
    docs: list[dict[str, Any]] = []
    for path, text in sorted(rendered.items()):
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc is None:  # a template switched off by its toggle renders to whitespace
                continue
            assert isinstance(doc, dict), f"{path} rendered a non-mapping document: {doc!r}"
            doc["__template__"] = path
            docs.append(doc)
    return docs


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {[d['metadata']['name'] for d in found]}"
    return found[0]


def kinds(docs: list[dict[str, Any]]) -> set[str]:
    return {d["kind"] for d in docs}


def pod_specs(docs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (d["metadata"]["name"], d["spec"]["template"]["spec"])
        for d in docs
        if d["kind"] in {"StatefulSet", "Deployment"}
    ]


def container(pod_spec: dict[str, Any]) -> dict[str, Any]:
    (only,) = [c for c in pod_spec["containers"] if c["name"] == "memstream"]
    return only


def clean(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != "__template__"}


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


@pytest.fixture(scope="module")
def rendered(chart: Any) -> dict[str, list[dict[str, Any]]]:
    return {name: render(chart, values) for name, values in SCENARIOS.items()}


# --- every manifest is valid -----------------------------------------------------------------------


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_manifest_is_valid_kubernetes(rendered: dict[str, list[dict[str, Any]]], scenario: str) -> None:
    docs = rendered[scenario]
    assert {"ConfigMap", "StatefulSet", "Service", "Deployment", "PodDisruptionBudget"} <= kinds(docs)
    for doc in docs:
        assert doc.get("apiVersion") and doc.get("kind"), doc["__template__"]
        assert doc["metadata"]["name"], doc["__template__"]
        key = (doc["apiVersion"], doc["kind"])
        if key in CRDS:
            check_custom_resource(doc)
            continue
        try:
            kubernetes_validate.validate(clean(doc), KUBE_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = f"{doc['__template__']} ({doc['kind']})"
            pytest.fail(f"{where} is not valid Kubernetes {KUBE_VERSION}: {exc.message} at {list(exc.path)}")
        except kubernetes_validate.SchemaNotFoundError as exc:
            pytest.fail(f"{doc['__template__']}: {exc.message}")


def check_custom_resource(doc: dict[str, Any]) -> None:
    where = doc["__template__"]
    assert doc["metadata"].get("namespace"), where
    spec = doc.get("spec")
    assert isinstance(spec, dict), where
    if doc["kind"] == "ScaledObject":
        target = spec["scaleTargetRef"]
        assert target["name"] and target["kind"] and target["apiVersion"], where
        assert isinstance(spec["minReplicaCount"], int) and isinstance(spec["maxReplicaCount"], int), where
        assert spec["minReplicaCount"] <= spec["maxReplicaCount"], where
        assert spec["triggers"], where
        for trigger in spec["triggers"]:
            assert trigger["type"], where
            # KEDA's trigger metadata is a map[string]string: a number here is rejected by the API server.
            assert trigger["metadata"] and all(isinstance(v, str) for v in trigger["metadata"].values()), where
    elif doc["kind"] == "ServiceMonitor":
        assert isinstance(spec["selector"], dict) and spec["selector"].get("matchLabels"), where
        assert spec["endpoints"], where
        for endpoint in spec["endpoints"]:
            assert endpoint.get("port") or endpoint.get("targetPort"), where
    else:  # pragma: no cover - CRDS lists only the two above
        pytest.fail(f"no structural check for {doc['kind']}")


def test_kind_sets_follow_the_toggles(rendered: dict[str, list[dict[str, Any]]]) -> None:
    autoscalers = {"ScaledObject", "HorizontalPodAutoscaler"}
    assert not (kinds(rendered["default"]) & (autoscalers | {"ServiceMonitor"}))
    assert kinds(rendered["keda"]) & autoscalers == {"ScaledObject"}
    assert kinds(rendered["hpa"]) & autoscalers == {"HorizontalPodAutoscaler"}
    assert "ServiceMonitor" in kinds(rendered["servicemonitor"])
    for docs in rendered.values():
        assert "Secret" not in kinds(docs), "the chart must never render a Secret (keys live in existing Secrets)"


def test_helm_lint_is_clean() -> None:
    report = helm.lint(CHART_DIR, strict=True, kube_version=f"v{KUBE_VERSION}")
    errors = [m for m in report["messages"] if m["severity"] >= 2]
    assert not report["errors"] and not errors, report


def test_chart_metadata(chart: Any) -> None:
    meta = chart.metadata
    assert meta["apiVersion"] == "v2"
    assert meta["name"] == "memstream"


# --- settings --------------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_configmap_holds_every_non_secret_setting_by_its_real_name(
    rendered: dict[str, list[dict[str, Any]]], scenario: str
) -> None:
    data = one(rendered[scenario], "ConfigMap")["data"]
    unknown = set(data) - SETTING_ENVS
    assert not unknown, f"ConfigMap names that are not Settings env vars: {sorted(unknown)}"
    assert not set(data) & SECRET_ENVS, "secret settings must not be in the ConfigMap"
    missing = NON_SECRET_ENVS - set(data)
    assert not missing, f"non-secret settings missing from the ConfigMap: {sorted(missing)}"
    assert all(isinstance(v, str) for v in data.values())


def test_configmap_values_are_what_memstream_can_parse(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for scenario, docs in rendered.items():
        data = one(docs, "ConfigMap")["data"]
        # raises SettingsError on a value memstream cannot use; a SASL password comes from its Secret
        settings = Settings.from_env({**data, "MEMSTREAM_KAFKA_SASL_PASSWORD": "from-the-secret"})
        assert settings.http_host == "0.0.0.0", "a loopback API address is unreachable for probes"
        assert settings.http_port == 8765
        assert not settings.embedded_broker, f"{scenario}: pods must use the external Kafka"
        assert settings.qdrant_url, f"{scenario}: pods must use the external Qdrant"
        assert str(settings.data_dir) == "/var/lib/memstream"
    prod = Settings.from_env({**one(rendered["production"], "ConfigMap")["data"], "MEMSTREAM_KAFKA_SASL_PASSWORD": "x"})
    assert prod.kafka_bootstrap == "kafka-0.kafka:9092,kafka-1.kafka:9092"
    assert prod.topic_prefix == "acme-mem" and prod.partitions == 12
    assert prod.embed_batch == 128 and prod.user == "platform@acme.test"
    assert prod.trace_exporter == "otlp" and prod.log_level == "warning"
    assert Settings.from_env(one(rendered["default"], "ConfigMap")["data"]).trace_exporter == "none"


def test_otlp_endpoint_is_passed_to_the_exporter(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for _, spec in pod_specs(rendered["production"]):
        env = {e["name"]: e for e in container(spec)["env"]}
        assert env["OTEL_EXPORTER_OTLP_ENDPOINT"]["value"] == "http://otel-collector:4318"
    for _, spec in pod_specs(rendered["default"]):
        assert "OTEL_EXPORTER_OTLP_ENDPOINT" not in {e["name"] for e in container(spec)["env"]}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"config": {"ANTHROPIC_API_KEY": "sk-ant-api03-NOT-A-REAL-KEY"}}, "config.ANTHROPIC_API_KEY is a secret"),
        ({"config": {"MEMSTREAM_QDRANT_API_KEY": "qdrant-literal"}}, "config.MEMSTREAM_QDRANT_API_KEY is a secret"),
        ({"config": {"MEMSTREAM_NOT_A_SETTING": "x"}}, "config.MEMSTREAM_NOT_A_SETTING is not a memstream setting"),
        ({"config": {"MEMSTREAM_TOPIC_PREFIX": "x"}}, "set by the chart's structured values"),
        ({"kafka": {"bootstrap": ""}}, "kafka.bootstrap is required"),
        ({"qdrant": {"url": ""}}, "qdrant.url is required"),
        ({"autoscaling": {"keda": {"enabled": True}, "hpa": {"enabled": True}}}, "at most one of autoscaling.keda"),
    ],
)
def test_bad_values_fail_to_render_with_a_clear_message(chart: Any, values: dict[str, Any], message: str) -> None:
    with pytest.raises(helm.HelmRenderError) as caught:
        render(chart, values)
    assert message in str(caught.value)
    assert "NOT-A-REAL-KEY" not in str(caught.value)


# --- secrets ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_secrets_come_only_from_secret_key_refs(rendered: dict[str, list[dict[str, Any]]], scenario: str) -> None:
    for name, spec in pod_specs(rendered[scenario]):
        for entry in container(spec).get("env", []):
            if entry["name"] in SECRET_ENVS:
                assert "value" not in entry, f"{name}: {entry['name']} has a literal value"
                ref = entry["valueFrom"]["secretKeyRef"]
                assert ref["name"] and ref["key"] and ref["optional"] is True, f"{name}: {entry}"
            else:
                assert "secretKeyRef" not in entry.get("valueFrom", {}), f"{name}: {entry}"
        for source in container(spec).get("envFrom", []):
            assert "secretRef" not in source


def test_provider_and_qdrant_keys_reference_the_named_secrets(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for name, spec in pod_specs(rendered["production"]):
        refs = {
            e["name"]: e["valueFrom"]["secretKeyRef"]
            for e in container(spec)["env"]
            if "secretKeyRef" in e.get("valueFrom", {})
        }
        assert set(refs) == SECRET_ENVS, name
        for env in ("ANTHROPIC_API_KEY", "XAI_API_KEY", "GOOGLE_API_KEY", "VOYAGE_API_KEY"):
            assert refs[env] == {"name": "memstream-providers", "key": env, "optional": True}
        assert refs["MEMSTREAM_QDRANT_API_KEY"] == {"name": "qdrant-key", "key": "api-key", "optional": True}
    # No Secret named: no key variables at all (raw mode), rather than refs to a Secret that is not there.
    for _, spec in pod_specs(rendered["default"]):
        assert not {e["name"] for e in container(spec)["env"]} & SECRET_ENVS


def test_default_values_hold_no_secret_material(chart: Any) -> None:
    text = (CHART_DIR / "values.yaml").read_text()
    for marker in ("sk-ant-", "xai-", "AIza", "pa-"):
        assert marker not in text
    values = chart.values
    assert "apiKey" not in values["providers"] and set(values["providers"]) == {"existingSecret", "secretKeys"}
    assert set(values["qdrant"]["apiKey"]) == {"existingSecret", "key"}


# --- workloads -------------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_workers_run_memstream_up_and_the_api_memstream_api_with_health_probes(
    rendered: dict[str, list[dict[str, Any]]], scenario: str
) -> None:
    docs = rendered[scenario]
    specs = dict(pod_specs(docs))
    assert set(specs) == {WORKER, API}
    config_name = one(docs, "ConfigMap")["metadata"]["name"]
    for name, spec in specs.items():
        c = container(spec)
        # No wrapper (a stale runtime file is ignored); the api is query-only: no consumer group.
        assert c["command"] == ["memstream", "api" if name == API else "up"], name
        assert {"name": "http", "containerPort": 8765, "protocol": "TCP"} in c["ports"]
        assert {"configMapRef": {"name": config_name}} in c["envFrom"]
        for probe in ("readinessProbe", "startupProbe"):
            assert c[probe]["httpGet"] == {"path": "/health", "port": 8765}, f"{name} {probe}"
        assert c["livenessProbe"]["httpGet"] == {"path": "/health/live", "port": 8765}, name
        assert c["resources"]["requests"] and c["resources"]["limits"], name
        assert spec["terminationGracePeriodSeconds"] >= 30, f"{name}: Faust needs time to leave the group"
        assert spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"], name
        mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        assert mounts["data"] == one(docs, "ConfigMap")["data"]["MEMSTREAM_DATA_DIR"]


def test_services_expose_8765(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["default"]
    api = one(docs, "Service", API)
    assert api["spec"]["ports"] == [{"name": "http", "port": 8765, "targetPort": "http", "protocol": "TCP"}]
    api_pods = one(docs, "Deployment", API)["spec"]["template"]["metadata"]["labels"]
    assert matches(api["spec"]["selector"], api_pods)
    headless = one(docs, "Service", WORKER)
    assert headless["spec"]["clusterIP"] == "None"
    statefulset = one(docs, "StatefulSet", WORKER)
    assert statefulset["spec"]["serviceName"] == WORKER
    assert matches(headless["spec"]["selector"], statefulset["spec"]["template"]["metadata"]["labels"])


def test_persistence_gives_each_worker_a_claim_at_the_data_dir(rendered: dict[str, list[dict[str, Any]]]) -> None:
    statefulset = one(rendered["default"], "StatefulSet", WORKER)
    (claim,) = statefulset["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert "storageClassName" not in claim["spec"]  # "": the cluster default
    volumes = {v["name"] for v in statefulset["spec"]["template"]["spec"].get("volumes", [])}
    assert "data" not in volumes, "the claim, not a pod volume, must back the data dir"

    prod = one(rendered["production"], "StatefulSet", WORKER)["spec"]["volumeClaimTemplates"][0]["spec"]
    assert prod["storageClassName"] == "fast-ssd" and prod["resources"]["requests"]["storage"] == "20Gi"


def test_no_persistence_means_no_claim_and_an_empty_dir(rendered: dict[str, list[dict[str, Any]]]) -> None:
    statefulset = one(rendered["no-persistence"], "StatefulSet", WORKER)
    assert "volumeClaimTemplates" not in statefulset["spec"]
    volumes = {v["name"]: v for v in statefulset["spec"]["template"]["spec"]["volumes"]}
    assert volumes["data"] == {"name": "data", "emptyDir": {}}


def test_storage_class_dash_means_explicitly_empty(chart: Any) -> None:
    docs = render(chart, {"persistence": {"storageClass": "-"}})
    claim = one(docs, "StatefulSet", WORKER)["spec"]["volumeClaimTemplates"][0]
    assert claim["spec"]["storageClassName"] == ""


def test_pdb_selects_the_worker_pods_only(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["default"]
    worker_labels = one(docs, "StatefulSet", WORKER)["spec"]["template"]["metadata"]["labels"]
    api_labels = one(docs, "Deployment", API)["spec"]["template"]["metadata"]["labels"]
    pdb = one(docs, "PodDisruptionBudget", WORKER)
    selector = pdb["spec"]["selector"]["matchLabels"]
    assert selector == one(docs, "StatefulSet", WORKER)["spec"]["selector"]["matchLabels"]
    assert matches(selector, worker_labels) and not matches(selector, api_labels)
    assert pdb["spec"]["maxUnavailable"] == 1


def test_replica_counts_and_image(rendered: dict[str, list[dict[str, Any]]], chart: Any) -> None:
    docs = rendered["default"]
    assert one(docs, "StatefulSet", WORKER)["spec"]["replicas"] == 2
    assert one(docs, "Deployment", API)["spec"]["replicas"] == 2
    for _, spec in pod_specs(docs):
        assert container(spec)["image"] == f"ghcr.io/memstream/memstream:{chart.metadata['appVersion']}"
    custom = render(chart, {"image": {"tag": "sha-abc123", "pullPolicy": "Always"}, "worker": {"replicas": 3}})
    assert one(custom, "StatefulSet", WORKER)["spec"]["replicas"] == 3
    for _, spec in pod_specs(custom):
        assert container(spec)["image"].endswith(":sha-abc123") and container(spec)["imagePullPolicy"] == "Always"


# --- autoscaling and monitoring --------------------------------------------------------------------


@pytest.mark.parametrize("scenario", ["keda", "production"])
def test_keda_scales_the_workers_on_the_lag_of_the_memstream_group(
    rendered: dict[str, list[dict[str, Any]]], scenario: str
) -> None:
    docs = rendered[scenario]
    prefix = one(docs, "ConfigMap")["data"]["MEMSTREAM_TOPIC_PREFIX"]
    scaled = one(docs, "ScaledObject", WORKER)
    assert scaled["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": WORKER}
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "kafka"
    meta = trigger["metadata"]
    assert meta["consumerGroup"] == prefix == SCENARIOS[scenario].get("kafka", {}).get("topicPrefix", "memstream")
    assert meta["bootstrapServers"] == one(docs, "ConfigMap")["data"]["MEMSTREAM_KAFKA_BOOTSTRAP"]
    assert meta["topic"] == f"{prefix}.snapshots"
    assert meta["lagThreshold"] == "100"
    # The autoscaler owns the replica count; the StatefulSet must not fight it on every upgrade.
    assert "replicas" not in one(docs, "StatefulSet", WORKER)["spec"]


def test_hpa_scales_the_worker_statefulset_on_external_consumer_lag(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["hpa"]
    hpa = one(docs, "HorizontalPodAutoscaler", WORKER)
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": WORKER}
    (metric,) = hpa["spec"]["metrics"]
    assert metric["type"] == "External"
    assert metric["external"]["metric"]["name"] == "memstream_consumer_lag"
    # memstream's gauge is memstream_consumer_lag{topic, partition}: select the prefixed topic.
    assert metric["external"]["metric"]["selector"]["matchLabels"] == {"topic": "memstream.snapshots"}
    assert metric["external"]["target"] == {"type": "AverageValue", "averageValue": "100"}
    assert 1 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
    assert "replicas" not in one(docs, "StatefulSet", WORKER)["spec"]


def test_service_monitor_scrapes_both_services(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["servicemonitor"]
    monitor = one(docs, "ServiceMonitor")
    selector = monitor["spec"]["selector"]["matchLabels"]
    services = [d for d in docs if d["kind"] == "Service"]
    assert {s["metadata"]["name"] for s in services if matches(selector, s["metadata"]["labels"])} == {WORKER, API}
    for endpoint in monitor["spec"]["endpoints"]:
        for service in services:
            assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [NAMESPACE]


# --- cross-checks against the code ----------------------------------------------------------------


def test_probed_and_scraped_paths_are_routes_of_memstream_api(rendered: dict[str, list[dict[str, Any]]]) -> None:
    from memstream.serve.routes import api_routes

    paths = {getattr(route, "path", "") for route in api_routes()}  # the routes the front door mounts
    assert {"/health", "/health/live"} <= paths
    monitor = one(rendered["servicemonitor"], "ServiceMonitor")
    for endpoint in monitor["spec"]["endpoints"]:
        assert endpoint["path"] in paths, endpoint["path"]


# --- tokens ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_pods_read_tokens_from_the_mounted_secret_and_never_run_open(
    rendered: dict[str, list[dict[str, Any]]], scenario: str
) -> None:
    docs = rendered[scenario]
    data = one(docs, "ConfigMap")["data"]
    assert data["MEMSTREAM_API_OPEN"] == "false"
    settings = Settings.from_env({**data, "MEMSTREAM_KAFKA_SASL_PASSWORD": "from-the-secret"})
    assert not settings.api_open
    secret = SCENARIOS[scenario].get("auth", {}).get("tokens", {}).get("existingSecret", "")
    for name, spec in pod_specs(docs):
        c = container(spec)
        assert "MEMSTREAM_TOKEN" not in {e["name"] for e in c["env"]}, name
        mounts = {m["name"]: m for m in c["volumeMounts"]}
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        if not secret:  # no tokens: the API refuses all but /health, it does not open up
            assert "tokens" not in mounts and "tokens" not in volumes, name
            continue
        assert mounts["tokens"]["readOnly"] is True
        assert str(settings.tokens_file).startswith(mounts["tokens"]["mountPath"] + "/"), name
        assert volumes["tokens"]["secret"]["secretName"] == secret
        assert volumes["tokens"]["secret"]["items"] == [{"key": "tokens.json", "path": settings.tokens_file.name}]


def test_kafka_sasl_over_tls_reaches_every_pod(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["production"]
    settings = Settings.from_env({**one(docs, "ConfigMap")["data"], "MEMSTREAM_KAFKA_SASL_PASSWORD": "from-the-secret"})
    assert (settings.kafka_security_protocol, settings.kafka_sasl_username) == ("SASL_SSL", "memstream-worker")
    for name, spec in pod_specs(docs):
        c = container(spec)
        refs = {
            e["name"]: e["valueFrom"]["secretKeyRef"]
            for e in c["env"]
            if "valueFrom" in e and "secretKeyRef" in e["valueFrom"]
        }
        assert refs["MEMSTREAM_KAFKA_SASL_PASSWORD"] == {"name": "memstream-kafka", "key": "password", "optional": True}
        mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        assert settings.kafka_ssl_cafile.startswith(mounts["kafka-ca"] + "/"), name
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes["kafka-ca"]["secret"]["secretName"] == "kafka-ca"
    assert Settings.from_env(one(rendered["default"], "ConfigMap")["data"]).kafka_security_protocol == "PLAINTEXT"


def test_the_service_monitor_presents_an_admin_token(rendered: dict[str, list[dict[str, Any]]]) -> None:
    monitor = one(rendered["production"], "ServiceMonitor")
    for endpoint in monitor["spec"]["endpoints"]:
        assert endpoint["authorization"] == {
            "type": "Bearer",
            "credentials": {"name": "memstream-metrics-token", "key": "token"},
        }


def test_the_chart_refuses_a_client_token_in_values(chart: Any) -> None:
    with pytest.raises(Exception, match="MEMSTREAM_TOKEN is a secret"):
        render(chart, {"config": {"MEMSTREAM_TOKEN": "mst_x"}})


def test_every_namespaced_object_is_in_the_release_namespace(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for docs in rendered.values():
        for doc in docs:
            assert doc["metadata"]["namespace"] == NAMESPACE, doc["__template__"]


def test_the_schema_validation_is_not_vacuous(rendered: dict[str, list[dict[str, Any]]]) -> None:
    statefulset = clean(one(rendered["default"], "StatefulSet", WORKER))
    broken = yaml.safe_load(yaml.safe_dump(statefulset))
    broken["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"]["port"] = [8765]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBE_VERSION, strict=True)
    unknown_field = yaml.safe_load(yaml.safe_dump(statefulset))
    unknown_field["spec"]["replica"] = 2
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(unknown_field, KUBE_VERSION, strict=True)
