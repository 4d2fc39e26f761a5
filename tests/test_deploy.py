"""The deployment files agree with the Kubernetes API, with each other and with the program:
deploy/kubernetes/ validates against the Kubernetes schemas (kubernetes-validate, offline),
its probes, ports, config.toml and Secret keys are ones the bot serves and reads; compose.yaml
and .env.example list every variable; the Dockerfile and compose.yaml name the images that
scripts/build-base-image.sh makes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from bot.config import OTHER_VARIABLES, ConfigError, _SecretValues, load_settings

ROOT = Path(__file__).resolve().parent.parent
K8S = ROOT / "deploy" / "kubernetes"
KUBERNETES_VERSION = "1.30"


def manifests() -> dict[str, dict]:
    """``{kind: resource}`` of every file in deploy/kubernetes/ (one resource each)."""
    out = {}
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            out[doc["kind"]] = doc
    return out


def test_manifests_validate_against_the_kubernetes_schemas():
    found = manifests()
    assert {
        "Deployment",
        "Service",
        "ConfigMap",
        "Secret",
        "PersistentVolumeClaim",
        "ServiceMonitor",
        "Kustomization",
    } <= set(found)
    for kind, resource in found.items():
        if kind in ("ServiceMonitor", "Kustomization"):  # not Kubernetes API kinds: checked below
            continue
        kubernetes_validate.validate(resource, KUBERNETES_VERSION, strict=True)


def test_validation_catches_a_wrong_field():
    """The check above can fail: a misspelt field is refused in strict mode."""
    bad = manifests()["Deployment"]
    bad["spec"]["template"]["spec"]["containers"][0]["livenessProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, KUBERNETES_VERSION, strict=True)


def test_probes_ports_and_files_agree_with_what_the_bot_serves():
    m = manifests()
    container = m["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == "/healthz"
        assert container[probe]["httpGet"]["port"] in ports
    env = {e["name"]: e["value"] for e in container["env"]}
    mounts = {v["name"]: v["mountPath"] for v in container["volumeMounts"]}
    assert env["THREADWISE_CONFIG"] == mounts["config"] + "/config.toml"
    # the Secret is mounted where the bot looks for secret files, its keys are secrets it reads
    from bot.config import SECRETS_DIRS

    assert mounts["secrets"] in SECRETS_DIRS
    known = {f.validation_alias for f in _SecretValues.model_fields.values()}
    assert set(m["Secret"]["stringData"]) <= known
    # the Service's selector reaches the pods, its ports are the container's; the ServiceMonitor the Service
    labels = m["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert m["Service"]["spec"]["selector"].items() <= labels.items()
    assert {p["targetPort"] for p in m["Service"]["spec"]["ports"]} <= set(ports)
    sm = m["ServiceMonitor"]["spec"]
    assert sm["selector"]["matchLabels"].items() <= m["Service"]["metadata"]["labels"].items()
    assert sm["endpoints"][0]["port"] in {p["name"] for p in m["Service"]["spec"]["ports"]}
    assert set(m["Kustomization"]["resources"]) <= {p.name for p in K8S.glob("*.yaml")}
    assert m["Deployment"]["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == 10001


def test_configmap_config_is_a_valid_config_toml(tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.startswith("THREADWISE_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "config.toml"
    path.write_text(manifests()["ConfigMap"]["data"]["config.toml"])
    container = manifests()["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    for e in container["env"]:
        if e["name"] != "THREADWISE_CONFIG":
            monkeypatch.setenv(e["name"], e["value"])
    s = load_settings(path)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert s.storage.backend == "postgres" and s.slack.mode == "http"
    assert (s.slack.http_port, s.monitoring.health_port, s.monitoring.metrics_port) == (
        ports["slack-http"],
        ports["metrics"],
        ports["metrics"],
    )


def _dotenv_names(text: str) -> dict[str, bool]:
    """``{NAME: set (uncommented)}`` of every ``NAME=value`` line, commented out or not."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(#\s*)?([A-Z][A-Z0-9_]*)=", line)
        if m:
            out[m.group(2)] = not m.group(1)
    return out


def test_env_example_lists_every_variable_and_each_is_valid(tmp_path):
    names = _dotenv_names((ROOT / ".env.example").read_text())
    secrets = {f.validation_alias for f in _SecretValues.model_fields.values()}
    compose = set(re.findall(r"\$\{([A-Z0-9_]+)", (ROOT / "compose.yaml").read_text()))
    dockerfile = set(re.findall(r"\b(THREADWISE_[A-Z0-9_]+)=", (ROOT / "Dockerfile").read_text()))
    missing = (secrets | set(OTHER_VARIABLES) | compose | dockerfile) - set(names)
    assert not missing, f".env.example lacks {sorted(missing)}"
    # every line, uncommented, is accepted by the bot (settings keys exist, JSON parses)
    uncommented = "".join(
        re.sub(r"^#\s*(?=[A-Z][A-Z0-9_]*=)", "", line) + "\n"
        for line in (ROOT / ".env.example").read_text().splitlines()
    )
    (tmp_path / ".env").write_text(uncommented)
    env = {k: v for k, v in os.environ.items() if not k.startswith("THREADWISE_")}
    code = "from bot.config import load_settings; s = load_settings(); print(s.slack.admins, s.knowledge.sources)"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "['U0123456789'] ['/knowledge']" in proc.stdout


def test_env_example_with_a_typo_is_refused(tmp_path, monkeypatch):
    """The check above can fail: a misspelt variable in .env names itself."""
    for name in list(os.environ):
        if name.startswith("THREADWISE_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("THREADWISE_SLACK__ADMIN=[]\n")
    with pytest.raises(ConfigError, match="THREADWISE_SLACK__ADMIN: unknown setting"):
        load_settings(ROOT / "config.toml")


def test_compose_file_shape():
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    bot, db = compose["services"]["bot"], compose["services"]["db"]
    assert bot["env_file"] == ".env" and "db" in bot["depends_on"]
    assert bot["environment"]["THREADWISE_STORAGE__BACKEND"] == "postgres"
    assert "@db:5432/" in bot["environment"]["THREADWISE_DATABASE_URL"]
    assert any(v.split(":")[0] in compose["volumes"] and v.endswith(":/data") for v in bot["volumes"])
    assert "pg_isready" in db["healthcheck"]["test"]


def test_images_named_by_the_dockerfile_and_compose_are_the_ones_the_script_builds():
    script = (ROOT / "scripts" / "build-base-image.sh").read_text()
    tags = set(re.findall(r"TAG=(\S+)", script))
    dockerfile_base = re.search(r"ARG PYTHON_IMAGE=(\S+)", (ROOT / "Dockerfile").read_text()).group(1)
    compose_db = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]["db"]["image"]
    assert {dockerfile_base, compose_db} <= tags
