"""The Helm chart, offline: linted and rendered by Helm's own library, every manifest
valid against the Kubernetes schemas, for the default values and the production example;
and what a rolling restart and a read-only pod depend on, checked in what it renders."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

from deploy.kustomize.render import rendered
from server.base import config

CHART = Path(__file__).parents[1] / "helm" / "gateway"
PRODUCTION = yaml.safe_load((CHART / "ci" / "production-values.yaml").read_text())
KUBERNETES = "1.30.0"
# Kinds of the Prometheus operator, not in the Kubernetes schemas.
CUSTOM = {"ServiceMonitor"}


def render(values: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """The rendered manifests by kind (one of each kind here)."""
    chart = helm.Chart.load(CHART)
    try:
        files = chart.render(values or {}, name="gw", namespace="gateway", is_install=True)
    finally:
        chart.close()
    manifests = [
        doc
        for path, text in files.items()
        if path.endswith(".yaml")
        for doc in yaml.safe_load_all(text)
        if doc
    ]
    by_kind = {m["kind"]: m for m in manifests}
    assert len(by_kind) == len(manifests), "two manifests of one kind"
    return by_kind


@pytest.mark.parametrize("values", [None, PRODUCTION], ids=["default", "production"])
def test_the_chart_lints_and_every_manifest_is_valid(values):
    linted = helm.lint(CHART, values, strict=True)
    assert linted["errors"] == [], linted
    manifests = render(values)
    for kind, manifest in manifests.items():
        if kind not in CUSTOM:
            kubernetes_validate.validate(manifest, KUBERNETES, strict=True)
    expected = {"ConfigMap", "Deployment", "Service", "ServiceAccount"}
    if values is PRODUCTION:
        expected |= {"HorizontalPodAutoscaler", "PodDisruptionBudget", "ServiceMonitor", "Job"}
    assert set(manifests) == expected


@pytest.mark.parametrize("values", [None, PRODUCTION], ids=["default", "production"])
def test_the_config_it_renders_is_one_the_gateway_takes(values):
    text = render(values)["ConfigMap"]["data"]["gateway.yaml"]
    config.parse(yaml.safe_load(text), "the chart's config")


def container(manifests: dict[str, dict[str, Any]]) -> dict[str, Any]:
    (only,) = manifests["Deployment"]["spec"]["template"]["spec"]["containers"]
    return only


def test_the_pod_is_read_only_unprivileged_and_probed_on_the_gateways_own_paths():
    manifests = render()
    gateway = container(manifests)
    security = gateway["securityContext"]
    assert security["readOnlyRootFilesystem"] and security["runAsNonRoot"]
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert not security["allowPrivilegeEscalation"]
    probes = {p: gateway[p]["httpGet"]["path"] for p in ("startupProbe", "livenessProbe")}
    assert probes == {"startupProbe": "/healthz", "livenessProbe": "/healthz"}
    assert gateway["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert {m["mountPath"] for m in gateway["volumeMounts"]} == {
        "/etc/gateway", "/var/lib/gateway", "/tmp",
    }  # fmt: skip
    assert gateway["resources"]["requests"] and gateway["resources"]["limits"]
    assert gateway["args"][-2:] == ["--workers", "1"]


def test_a_stop_waits_for_readiness_to_reach_the_balancer_and_for_calls_to_drain():
    manifests = render()
    config = yaml.safe_load(manifests["ConfigMap"]["data"]["gateway.yaml"])
    operations = config["operations"]
    assert operations["readiness_delay_s"] >= 3  # 0 lost requests in a rolling restart
    grace = manifests["Deployment"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace > operations["readiness_delay_s"] + operations["drain_s"]
    strategy = manifests["Deployment"]["spec"]["strategy"]["rollingUpdate"]
    assert strategy["maxUnavailable"] == 0
    assert config["server"]["host"] == "0.0.0.0" and config["server"]["grpc_max_connection_age_s"]


def test_a_changed_config_rolls_the_pods():
    def checksum(values: dict[str, Any]) -> str:
        template = render(values)["Deployment"]["spec"]["template"]
        return str(template["metadata"]["annotations"]["checksum/config"])

    base = {"config": {"default_model": "sim-mini"}}
    changed = {"config": {"default_model": "sim-mini", "operations": {"drain_s": 10}}}
    assert checksum(base) == checksum(base) != checksum(changed)


def test_storage_urls_come_from_existing_secrets_never_from_the_config():
    manifests = render(PRODUCTION)
    env = {e["name"]: e for e in container(manifests)["env"]}
    assert env["GATEWAY_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "gateway-storage", "key": "database-url",
    }  # fmt: skip
    assert env["GATEWAY_REDIS_URL"]["valueFrom"]["secretKeyRef"]["key"] == "redis-url"
    config = manifests["ConfigMap"]["data"]["gateway.yaml"]
    assert "postgres" not in config and "redis" not in config
    job = manifests["Job"]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["migrate"]


def test_a_migration_job_without_a_database_is_refused_by_name():
    with pytest.raises(helm.HelmError, match="migrations.job needs database.existingSecret"):
        render({"migrations": {"job": True}})


def test_the_kustomize_base_is_the_charts_default_render_and_builds():
    base = CHART.parents[1] / "kustomize" / "base"
    written = {p.name: p.read_text() for p in base.glob("*.yaml") if p.name != "kustomization.yaml"}
    assert written == rendered(), "run: .venv/bin/python -m deploy.kustomize.render"
    built = subprocess.run(
        ["kubectl", "kustomize", str(base)], capture_output=True, text=True, check=True
    ).stdout
    kinds = {doc["kind"] for doc in yaml.safe_load_all(built)}
    assert kinds == {"ConfigMap", "Deployment", "Service", "ServiceAccount"}
