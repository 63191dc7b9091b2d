"""Checks the Helm chart charts/canaryd with real Helm (Helm v4's Go SDK through helm-python-sdk).

For the default values, a matrix of value sets and every file in the chart's examples/, it renders the chart,
lints it, validates every rendered object with kubernetes-validate --strict (the ServiceMonitor and the
PrometheusRule against the vendored servicemonitor.schema.json and prometheusrule.schema.json, which the validator
has no schema for), runs the Deployment's args through `canaryd run --check-config`, checks the RBAC, security and
lease invariants the chart promises, and the dashboards ConfigMap and the alerts (promtool check rules and
promtool test rules; monitoring.py). It also
checks the values schema's rejections, the CRD template against the generated file, the README's values table
and the chart version against Cargo.toml.

Usage: .venv/bin/python tests/chart/verify.py [--canaryd PATH]   (tests/run.sh installs .venv and builds PATH)
Prints one line per check and a closing `N passed, M failed`; exits 1 when any check failed. Nothing is skipped:
a missing package or binary is a failure that says how to get it.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import subprocess
import sys
import time
import tomllib
import traceback
from pathlib import Path
from typing import Any, Callable

INSTALL_HINT = (
    "run tests/run.sh, or: python3 -m venv .venv && .venv/bin/pip install -r tests/chart/requirements.txt, "
    "then run this script with .venv/bin/python"
)
try:
    import helm_python as helm
    import jsonschema
    import kubernetes_validate.utils as kv
    import yaml

    import monitoring
except ImportError as missing:
    print(f"FAIL the chart checks need the Python package {missing.name!r}: {INSTALL_HINT}", file=sys.stderr)
    print("0 passed, 1 failed")
    sys.exit(1)

# libyaml's loader: the rendered CRDs are large, and the pure-Python one dominated the run time.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# kubernetes-validate re-reads its JSON schemas on every call; they never change during a run.
kv.schema_contents = functools.lru_cache(maxsize=None)(kv.schema_contents)

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "canaryd"
HERE = Path(__file__).resolve().parent
RELEASE = "canaryd"
NAMESPACE = "canaryd"
# The chart's kubeVersion floor and the newest Kubernetes the validator knows.
KUBE_VERSIONS = ["1.25", kv.major_minor(kv.latest_version())]
# Seconds a stopping leader needs beyond the lease duration to release its Lease and finish in-flight work.
LEASE_RELEASE_MARGIN = 5

MATRIX: dict[str, dict[str, Any]] = {
    "default values": {},
    "all namespaces with an instance id and a Prometheus address": {
        "instanceId": "canaryd",
        "prometheus": {"address": "http://prometheus.monitoring:9090", "maxConcurrency": 4, "shareWindow": "10s"},
        "log": {"level": "canaryd=debug,info", "format": "text"},
        "extraArgs": ["--lease-namespace=canaryd"],
    },
    "a namespace list": {"watch": {"namespaces": ["team-a", "team-b"]}},
    "Rollouts progressed, all namespaces": {"rollouts": {"enabled": True}, "instanceId": "canaryd"},
    "Rollouts progressed in a namespace list": {"rollouts": {"enabled": True}, "watch": {"namespaces": ["team-a"]}},
    "a namespace list without secrets access": {
        "watch": {"namespaces": ["team-a"]},
        "rbac": {"secrets": False},
    },
    "ServiceMonitor and PodDisruptionBudget on": {
        "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}},
        "podDisruptionBudget": {"enabled": True},
    },
    "dashboards and alerts, with the job Argo's dashboard selects": {
        "metrics": {"serviceMonitor": {"enabled": True, "job": "argo-rollouts-metrics"}},
        "dashboards": {"enabled": True, "namespace": "monitoring", "annotations": {"grafana_folder": "canaryd"}},
        "prometheusRule": {"enabled": True, "labels": {"release": "prom"}},
    },
    "alerts scoped to the metrics Service's job": {"prometheusRule": {"enabled": True}},
    "PodDisruptionBudget by maxUnavailable": {"podDisruptionBudget": {"enabled": True, "maxUnavailable": "50%"}},
    "CRDs off": {"crds": {"install": False}},
    "notifications with Argo's built-ins and a webhook, in a namespace list": {
        "watch": {"namespaces": ["team-a"]},
        "notifications": {"builtinTriggers": True, "config": {
            "service.webhook.hook": "url: https://hooks.example.test\n",
            "trigger.on-rollout-aborted": "- send: [rollout-aborted]\n",
        }},
    },
    "notifications off": {"notifications": {"enabled": False}},
    "self-service notifications": {"notifications": {"selfService": True}},
    "dashboard, read-only": {"dashboard": {"enabled": True}},
    "dashboard with actions in a namespace list, behind a NetworkPolicy": {
        "dashboard": {"enabled": True, "port": 8080, "actions": True, "networkPolicyFrom": [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}]},
        "watch": {"namespaces": ["team-a"]},
        "networkPolicy": {"enabled": True},
    },
    "every traffic router": {"rbac": {"routers": {"istio": True, "nginx": True, "gatewayAPI": True, "smi": True,
                                                  "traefik": True, "alb": True}}},
    "SMI only": {"rbac": {"routers": {"smi": True}}},
    "Traefik only": {"rbac": {"routers": {"traefik": True}}},
    "Traefik v2 with Argo's flags for it, Rollouts progressed by Argo's default of 10 threads": {
        "rollouts": {"enabled": True, "threads": 10, "traefik": {"apiGroup": "traefik.containo.us",
                                                  "apiVersion": "traefik.containo.us/v1alpha1"}},
        "rbac": {"routers": {"traefik": True}},
    },
    "ALB only": {"rbac": {"routers": {"alb": True}}},
    "Rollouts behind ALB, Ingresses watched from the start": {"rollouts": {"enabled": True},
                                                              "rbac": {"routers": {"alb": True}}},
    "Istio only, in a namespace list": {"watch": {"namespaces": ["team-a"]}, "rbac": {"routers": {"istio": True}}},
    "CRDs not kept on uninstall": {"crds": {"keep": False}},
    "existing service account": {"serviceAccount": {"create": False, "name": "platform-canaryd"}},
    "one replica without leader election": {"replicas": 1, "leaderElection": {"enabled": False}},
    "longer lease with a matching grace period": {
        "leaderElection": {"leaseDuration": "1m", "renewDeadline": "40s", "retryPeriod": "5s"},
        "terminationGracePeriodSeconds": 75,
    },
    "NetworkPolicy with egress rules": {
        "networkPolicy": {
            "enabled": True,
            "metricsFrom": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
            "egress": [{"ports": [{"port": 443, "protocol": "TCP"}, {"port": 9090, "protocol": "TCP"}]}],
        }
    },
    "scheduling, pod metadata, env and pull secrets": {
        "imagePullSecrets": [{"name": "regcred"}],
        "podAnnotations": {"example.com/team": "platform"},
        "podLabels": {"team": "platform"},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "platform", "effect": "NoSchedule"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "arch", "operator": "In", "values": ["amd64"]}]}
                    ]
                }
            }
        },
        "priorityClassName": "system-cluster-critical",
        "env": [{"name": "RUST_BACKTRACE", "value": "1"}],
        "envFrom": [{"configMapRef": {"name": "canaryd-extra"}}],
        "metrics": {"port": 9100, "service": {"port": 80}},
    },
}
for example in sorted((CHART / "examples").glob("*.yaml")):
    MATRIX[f"example {example.name}"] = yaml.safe_load(example.read_text()) or {}

# Values Helm must refuse, with the error type and the words its message must contain.
REFUSED: list[tuple[str, dict[str, Any], type[Exception], str]] = [
    ("the schema rejects a string for replicas", {"replicas": "two"},
     helm.HelmValuesError, "at '/replicas': got string, want integer"),
    ("the schema rejects an unknown top-level key", {"replica": 2},
     helm.HelmValuesError, "at '': additional properties 'replica' not allowed"),
    ("the schema rejects an unknown nested key", {"crds": {"instal": False}},
     helm.HelmValuesError, "at '/crds': additional properties 'instal' not allowed"),
    ("the schema rejects a lease duration without a unit", {"leaderElection": {"leaseDuration": "15"}},
     helm.HelmValuesError, "at '/leaderElection/leaseDuration': '15' does not match pattern"),
    ("the schema rejects a share window without a unit", {"prometheus": {"shareWindow": "10"}},
     helm.HelmValuesError, "at '/prometheus/shareWindow': '10' does not match pattern"),
    ("extraArgs may not set the share window behind its value", {"extraArgs": ["--prometheus-share-window=5s"]},
     helm.HelmRenderError, "extraArgs: --prometheus-share-window is set by the chart; use the value prometheus.shareWindow instead"),
    ("the schema rejects an unknown log format", {"log": {"format": "xml"}},
     helm.HelmValuesError, "at '/log/format'"),
    ("the schema rejects a namespace that is not a DNS label", {"watch": {"namespaces": ["Team_A"]}},
     helm.HelmValuesError, "at '/watch/namespaces/0'"),
    ("extraArgs may not repeat a flag the chart sets", {"extraArgs": ["--log-format=text"]},
     helm.HelmRenderError, "extraArgs: --log-format is set by the chart; use the value log.format instead"),
    ("extraArgs may not widen the watched namespaces behind RBAC's back", {"extraArgs": ["--namespace=kube-system"]},
     helm.HelmRenderError, "extraArgs: --namespace is set by the chart; use the value watch.namespaces instead"),
    ("extraArgs may not turn the dashboard's actions on behind RBAC's back", {"extraArgs": ["--dashboard-actions=true"]},
     helm.HelmRenderError, "extraArgs: --dashboard-actions is set by the chart; use the value dashboard.actions instead"),
    ("the schema rejects a Traefik API group that is not a domain", {"rollouts": {"traefik": {"apiGroup": "traefik"}}},
     helm.HelmValuesError, "at '/rollouts/traefik/apiGroup': 'traefik' does not match pattern"),
    ("the schema rejects a Traefik API version with an empty version", {"rollouts": {"traefik": {"apiVersion": "traefik.io/"}}},
     helm.HelmValuesError, "at '/rollouts/traefik/apiVersion'"),
    ("the schema rejects no Rollout threads", {"rollouts": {"threads": 0}},
     helm.HelmValuesError, "at '/rollouts/threads'"),
    ("extraArgs may not point the Traefik router at a group RBAC does not grant", {"extraArgs": ["--traefik-api-group=traefik.containo.us"]},
     helm.HelmRenderError, "extraArgs: --traefik-api-group is set by the chart; use the value rollouts.traefik.apiGroup instead"),
    ("an existing service account needs a name", {"serviceAccount": {"create": False}},
     helm.HelmRenderError, "serviceAccount.name is required when serviceAccount.create is false"),
]

WATCH_RULES = {
    ("argoproj.io", "analysisruns"): {"get", "list", "watch", "patch", "update", "delete"},
    ("argoproj.io", "analysisruns/status"): {"get", "patch", "update"},
    ("argoproj.io", "analysistemplates"): {"get", "list", "watch"},
    ("", "events"): {"create", "patch"},
    ("events.k8s.io", "events"): {"create", "patch"},
    ("batch", "jobs"): {"create", "get", "list", "watch", "delete"},
}
SECRET_RULE = {("", "secrets"): {"get"}}
# With rollouts.enabled: the Rollouts, their status, the ReplicaSets and AnalysisRuns canaryd creates for them,
# the Services they name, and their pods (listed and evicted for spec.restartAt, patched for ephemeral metadata). Merged into WATCH_RULES by
# resource (analysisruns gains create).
ROLLOUT_RULES = {
    ("argoproj.io", "rollouts"): {"get", "list", "watch", "patch", "update"},
    ("argoproj.io", "rollouts/status"): {"get", "patch", "update"},
    ("argoproj.io", "analysisruns"): {"create"},
    ("apps", "replicasets"): {"get", "list", "watch", "create", "patch", "update", "delete"},
    ("", "services"): {"get", "list", "watch", "patch"},
    ("", "pods"): {"list", "patch"},
    ("", "pods/eviction"): {"create"},
}


def merged(*rule_sets: dict[tuple[str, str], set[str]]) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for rules in rule_sets:
        for key, verbs in rules.items():
            out.setdefault(key, set()).update(verbs)
    return out

CLUSTER_TEMPLATE_RULE = {("argoproj.io", "clusteranalysistemplates"): {"get", "list", "watch"}}
LEASE_RULE = {("coordination.k8s.io", "leases"): {"get", "create", "update"}}
# With notifications.enabled: the notification ConfigMap and Secret, by name, in the release namespace; and a
# new leader lists Events to catch up on those it has not notified.
NOTIFICATION_RULE = {("", "configmaps"): {"get", "list", "watch"}, ("", "secrets"): {"get", "list", "watch"}}
NOTIFICATION_OBJECTS = {"configmaps": ["argo-rollouts-notification-configmap"],
                        "secrets": ["argo-rollouts-notification-secret"]}
# With dashboard.enabled: the pages read each Rollout, what it owns and its Events, and watch for changes; with
# dashboard.actions the buttons patch the Rollout or its status.
DASHBOARD_RULES = {
    ("argoproj.io", "rollouts"): {"get", "list", "watch"},
    ("apps", "replicasets"): {"list", "watch"},
    ("", "pods"): {"list"},
    ("", "events"): {"list"},
}
DASHBOARD_ACTION_RULES = {
    ("argoproj.io", "rollouts"): {"patch"},
    ("argoproj.io", "rollouts/status"): {"patch"},
}
NOTIFICATION_WATCH_RULE = {("events.k8s.io", "events"): {"list"}}
BUILTIN_NOTIFICATIONS = CHART / "files" / "notifications-builtin.yaml"
ROUTER_RULES = {
    "istio": {("networking.istio.io", "virtualservices"): {"get", "list", "watch", "update", "patch"},
              ("networking.istio.io", "destinationrules"): {"get", "list", "watch", "update", "patch"}},
    "nginx": {("networking.k8s.io", "ingresses"): {"get", "list", "watch", "create", "update", "patch"}},
    "gatewayAPI": {("gateway.networking.k8s.io", "httproutes"): {"get", "list", "watch", "update", "patch"}},
    "smi": {("split.smi-spec.io", "trafficsplits"): {"get", "create", "patch"}},
    "alb": {("networking.k8s.io", "ingresses"): {"get", "list", "watch", "update"}},
}


def router_rules(values: dict[str, Any]) -> dict[str, dict[tuple[str, str], set[str]]]:
    """ROUTER_RULES and Traefik's, whose group is the one canaryd is told (rollouts.traefik.apiGroup)."""
    traefik = {(values["rollouts"]["traefik"]["apiGroup"], "traefikservices"): {"get", "update"}}
    return {**ROUTER_RULES, "traefik": traefik}


class CheckFailed(Exception):
    pass


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def go_duration_seconds(text: str) -> float:
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
    parts = re.findall(r"([0-9.]+)(ns|us|µs|ms|s|m|h)", text)
    expect("".join(n + u for n, u in parts) == text, f"{text!r} is not a Go duration")
    return sum(float(n) * units[u] for n, u in parts)


def render(chart: Any, values: dict[str, Any]) -> list[dict[str, Any]]:
    manifests = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    objects = []
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.load_all(text, Loader=LOADER):
            if doc:
                expect(isinstance(doc, dict) and "kind" in doc, f"{path} rendered a non-object: {doc!r}")
                objects.append(doc)
    return objects


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = by_kind(objects, kind)
    expect(len(found) == 1, f"expected one {kind}, found {len(found)}")
    return found[0]


def grants(role: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    """The verbs a Role or ClusterRole grants, keyed by (apiGroup, resource)."""
    out: dict[tuple[str, str], set[str]] = {}
    for rule in role.get("rules", []):
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                expect("*" not in rule["verbs"] and group != "*" and resource != "*", f"wildcard in {rule}")
                out.setdefault((group, resource), set()).update(rule["verbs"])
    return out


def validate_metadata(metadata: dict[str, Any], version: str) -> None:
    """Checks a CRD-typed object's metadata against Kubernetes' ObjectMeta by validating a ConfigMap wearing it."""
    kv.validate({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}, version, strict=True)


VENDORED_SCHEMAS = {
    "ServiceMonitor": json.loads((HERE / "servicemonitor.schema.json").read_text()),
    "PrometheusRule": monitoring.PROMETHEUS_RULE_SCHEMA,
}


def validate_objects(objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        name = f"{obj['kind']}/{obj.get('metadata', {}).get('name')}"
        for version in KUBE_VERSIONS:
            try:
                if obj["kind"] in VENDORED_SCHEMAS:
                    jsonschema.Draft202012Validator(VENDORED_SCHEMAS[obj["kind"]]).validate(obj)
                    validate_metadata(obj["metadata"], version)
                else:
                    kv.validate(obj, version, strict=True)
            except kv.ValidationError as e:
                path = ".".join(str(p) for p in e.path)
                raise CheckFailed(f"{name} is invalid for Kubernetes {version}: {path}: {e.message}") from None
            except jsonschema.ValidationError as e:
                path = ".".join(str(p) for p in e.path)
                raise CheckFailed(f"{name} fails its vendored schema: {path}: {e.message}") from None
            except kv.SchemaNotFoundError as e:
                raise CheckFailed(f"{name}: {e.message}; add a vendored schema for it") from None


def check_config(canaryd: Path, deployment: dict[str, Any]) -> None:
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    expect(args[:1] == ["run"], f"the args must start with the run subcommand: {args}")
    # The container's literal env, and POD_NAMESPACE as the downward API would set it.
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = var["value"]
        elif var.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.namespace":
            env[var["name"]] = deployment["metadata"]["namespace"]
    command = [str(canaryd), "run", "--check-config", *args[1:]]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    expect(done.returncode == 0, f"`{' '.join(command)}` exited {done.returncode}: {done.stderr.strip()}")


def check_invariants(values: dict[str, Any], objects: list[dict[str, Any]]) -> None:
    """What the chart promises for any values: security, probes, lease timing, RBAC scoped to what canaryd uses."""
    deployment = one(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    expect(deployment["spec"]["replicas"] == values["replicas"], "replicas are not the value's")
    sc = container["securityContext"]
    expect(sc.get("runAsNonRoot") is True and sc.get("runAsUser") == 65532, f"container not non-root: {sc}")
    expect(sc.get("readOnlyRootFilesystem") is True, "root filesystem is writable")
    expect(sc.get("allowPrivilegeEscalation") is False, "privilege escalation allowed")
    expect(sc.get("capabilities", {}).get("drop") == ["ALL"], "capabilities not dropped")
    expect(sc.get("seccompProfile", {}).get("type") == "RuntimeDefault", "no RuntimeDefault seccomp profile")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = container[probe]["httpGet"]
        expect(get == {"path": path, "port": "metrics"}, f"{probe} is {get}")
    dashboard = values["dashboard"]
    ports = [{"name": "metrics", "containerPort": values["metrics"]["port"], "protocol": "TCP"}]
    if dashboard["enabled"]:
        ports.append({"name": "dashboard", "containerPort": dashboard["port"], "protocol": "TCP"})
    expect(container["ports"] == ports, f"ports: {container['ports']}")
    dashboard_args = [a for a in container["args"] if a.startswith("--dashboard")]
    expected_args = ([f"--dashboard-addr=0.0.0.0:{dashboard['port']}"] if dashboard["enabled"] else []) + (
        ["--dashboard-actions=true"] if dashboard["enabled"] and dashboard["actions"] else [])
    expect(dashboard_args == expected_args, f"the dashboard's args are {dashboard_args}")
    rollouts = "--rollouts=true" in container["args"]
    expect(rollouts == values["rollouts"]["enabled"], f"--rollouts in the args is {rollouts}")
    traefik = values["rollouts"]["traefik"]
    traefik_args = [a for a in container["args"] if a.startswith("--traefik-")]
    expected_traefik = [f"--traefik-api-group={traefik['apiGroup']}",
                        f"--traefik-api-version={traefik['apiVersion']}"] if rollouts else []
    expect(traefik_args == expected_traefik, f"Traefik's args are {traefik_args}")
    threads_args = [a for a in container["args"] if a.startswith("--rollout-threads")]
    expected_threads = [f"--rollout-threads={values['rollouts']['threads']}"] if rollouts else []
    expect(threads_args == expected_threads, f"--rollout-threads in the args is {threads_args}")
    alb_args = [a for a in container["args"] if a.startswith("--watch-alb-ingresses")]
    expected_alb = ["--watch-alb-ingresses=true"] if rollouts and values["rbac"]["routers"]["alb"] else []
    expect(alb_args == expected_alb, f"--watch-alb-ingresses in the args is {alb_args}")
    notifications = "--notifications=false" not in container["args"]
    expect(notifications == values["notifications"]["enabled"], f"notifications in the args are {notifications}")
    self_service = "--self-service-notification-enabled=true" in container["args"]
    expect(self_service == (notifications and values["notifications"]["selfService"]),
           f"--self-service-notification-enabled in the args is {self_service}")
    check_notifications(values["notifications"], objects)
    pod_namespace = [e for e in container["env"] if e["name"] == "POD_NAMESPACE"]
    expect(
        pod_namespace == [{"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
        "POD_NAMESPACE does not come from the downward API",
    )
    lease = values["leaderElection"]
    if lease["enabled"]:
        needed = go_duration_seconds(lease["leaseDuration"]) + LEASE_RELEASE_MARGIN
        expect(
            pod["terminationGracePeriodSeconds"] >= needed,
            f"terminationGracePeriodSeconds {pod['terminationGracePeriodSeconds']} < lease duration + "
            f"{LEASE_RELEASE_MARGIN}s ({needed}s): the leader cannot release its Lease",
        )
    else:
        expect(values["replicas"] <= 1, "several replicas without leader election would all reconcile")

    sa_name = pod["serviceAccountName"]
    accounts = by_kind(objects, "ServiceAccount")
    if values["serviceAccount"]["create"]:
        expect([a["metadata"]["name"] for a in accounts] == [sa_name], "the ServiceAccount is not the pod's")
    else:
        expect(accounts == [], "a ServiceAccount was created although serviceAccount.create is false")
        expect(sa_name == values["serviceAccount"]["name"], "the pod does not use the existing ServiceAccount")

    roles = {(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")): o for o in objects
             if o["kind"] in ("Role", "ClusterRole")}
    for binding in by_kind(objects, "RoleBinding") + by_kind(objects, "ClusterRoleBinding"):
        expect(
            binding["subjects"] == [{"kind": "ServiceAccount", "name": sa_name, "namespace": NAMESPACE}],
            f"{binding['kind']}/{binding['metadata']['name']} binds {binding['subjects']}",
        )
        key = (binding["roleRef"]["kind"], binding["roleRef"]["name"],
               binding["metadata"].get("namespace") if binding["roleRef"]["kind"] == "Role" else None)
        expect(key in roles, f"{binding['kind']}/{binding['metadata']['name']} refers to a missing {key}")
    expect(len(roles) == len(by_kind(objects, "RoleBinding")) + len(by_kind(objects, "ClusterRoleBinding")),
           "a role without a binding")

    watch_rules = merged(WATCH_RULES, SECRET_RULE if values["rbac"]["secrets"] else {},
                         ROLLOUT_RULES if values["rollouts"]["enabled"] else {},
                         NOTIFICATION_WATCH_RULE if values["notifications"]["enabled"] else {},
                         DASHBOARD_RULES if values["dashboard"]["enabled"] else {},
                         DASHBOARD_ACTION_RULES if values["dashboard"]["enabled"] and values["dashboard"]["actions"] else {},
                         *(rules for router, rules in router_rules(values).items() if values["rbac"]["routers"][router]))
    namespaces = values["watch"]["namespaces"]
    notification_roles = {name: r for (kind, name, _), r in roles.items() if ("", "configmaps") in grants(r)}
    cluster_roles = [grants(r) for (kind, name, _), r in roles.items()
                     if kind == "ClusterRole" and name not in notification_roles]
    namespaced = {ns: grants(r) for (kind, name, ns), r in roles.items()
                  if kind == "Role" and name not in notification_roles}
    lease_roles = {ns: g for ns, g in namespaced.items() if ("coordination.k8s.io", "leases") in g}
    if lease["enabled"]:
        expect(list(lease_roles) == [NAMESPACE], f"Lease access outside the release namespace: {list(lease_roles)}")
        expect(lease_roles[NAMESPACE] == LEASE_RULE, f"Lease role grants {lease_roles[NAMESPACE]}")
    else:
        expect(lease_roles == {}, "Lease access without leader election")
    for ns in lease_roles:
        namespaced.pop(ns)
    if values["notifications"]["enabled"]:
        expect(list(notification_roles) == [f"{RELEASE}-notifications"], f"notification roles: {list(notification_roles)}")
        role = notification_roles[f"{RELEASE}-notifications"]
        if values["notifications"]["selfService"]:
            expect(role["kind"] == "ClusterRole", "self-service notification settings not read in every namespace")
        else:
            expect(role["kind"] == "Role" and role["metadata"]["namespace"] == NAMESPACE,
                   "notification settings read outside the release namespace")
        expect(grants(role) == NOTIFICATION_RULE, f"the notification Role grants {grants(role)}")
        named = {resource: rule.get("resourceNames") for rule in role["rules"] for resource in rule["resources"]}
        expect(named == NOTIFICATION_OBJECTS, f"the notification Role is not limited to its two objects: {named}")
    else:
        expect(notification_roles == {}, "notification access without notifications")
    if not namespaces:
        expect(cluster_roles == [watch_rules | CLUSTER_TEMPLATE_RULE], f"ClusterRole grants {cluster_roles}")
        expect(namespaced == {}, f"Roles although all namespaces are watched: {list(namespaced)}")
    else:
        expect(cluster_roles == [CLUSTER_TEMPLATE_RULE], f"cluster-wide grants beyond ClusterAnalysisTemplates: "
                                                         f"{cluster_roles}")
        expect(namespaced == {ns: watch_rules for ns in namespaces}, f"Roles per namespace: {namespaced}")

    crds = by_kind(objects, "CustomResourceDefinition")
    expected_crds = 4 if values["crds"]["install"] else 0
    expect(len(crds) == expected_crds, f"{len(crds)} CRDs rendered, expected {expected_crds}")
    for crd in crds:
        keep = crd["metadata"].get("annotations", {}).get("helm.sh/resource-policy") == "keep"
        expect(keep == values["crds"]["keep"], f"{crd['metadata']['name']}: keep annotation is {keep}")

    monitors = by_kind(objects, "ServiceMonitor")
    expect(len(monitors) == int(values["metrics"]["serviceMonitor"]["enabled"]), "ServiceMonitor switch ignored")
    expect(len(by_kind(objects, "PodDisruptionBudget")) == int(values["podDisruptionBudget"]["enabled"]),
           "PodDisruptionBudget switch ignored")
    expect(len(by_kind(objects, "NetworkPolicy")) == int(values["networkPolicy"]["enabled"]),
           "NetworkPolicy switch ignored")
    services = {s["metadata"]["name"]: s for s in by_kind(objects, "Service")}
    service = services.pop(f"{RELEASE}-metrics")
    expect(service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"],
           "the metrics Service does not select the pods")
    check_dashboard_service(values["dashboard"], services, deployment)
    # Prometheus Operator names the job after the Service unless the ServiceMonitor relabels it.
    job = values["metrics"]["serviceMonitor"]["job"] or service["metadata"]["name"]
    for monitor in monitors:
        endpoint = monitor["spec"]["endpoints"][0]
        expect(endpoint.get("honorLabels") is True, "the ServiceMonitor must keep the series' namespace labels")
        relabeled = [r["replacement"] for r in endpoint.get("relabelings", []) if r["targetLabel"] == "job"]
        expect(relabeled == ([job] if values["metrics"]["serviceMonitor"]["job"] else []),
               f"the job relabeling {relabeled} is not {job}")
    monitoring.check_dashboards(objects, values, expect)
    monitoring.check_rules(objects, values, job, expect)


def check_dashboard_service(values: dict[str, Any], services: dict[str, Any], deployment: dict[str, Any]) -> None:
    """The dashboard's Service: only when enabled, selecting the pods, on the dashboard's port."""
    expect(list(services) == ([f"{RELEASE}-dashboard"] if values["enabled"] else []), f"other Services: {list(services)}")
    for service in services.values():
        expect(service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"],
               "the dashboard Service does not select the pods")
        expect(service["spec"]["ports"] == [{"name": "dashboard", "port": values["port"], "targetPort": "dashboard",
                                             "protocol": "TCP"}], f"the dashboard Service's ports: {service['spec']['ports']}")


def check_notifications(values: dict[str, Any], objects: list[dict[str, Any]]) -> None:
    """The notification ConfigMap: Argo's built-ins unchanged, the config's keys over them, only when asked for."""
    config_maps = [o for o in by_kind(objects, "ConfigMap")
                   if o["metadata"]["name"] == "argo-rollouts-notification-configmap"]
    wanted = values["enabled"] and (values["builtinTriggers"] or bool(values["config"]))
    expect(len(config_maps) == int(wanted), f"{len(config_maps)} notification ConfigMaps rendered")
    if not wanted:
        return
    expect(config_maps[0]["metadata"]["namespace"] == NAMESPACE, "the notification ConfigMap is not in the release namespace")
    builtins = yaml.safe_load(BUILTIN_NOTIFICATIONS.read_text()) if values["builtinTriggers"] else {}
    expect(config_maps[0]["data"] == builtins | values["config"], "the ConfigMap is not the built-ins and the config")


def check_value_set(chart: Any, canaryd: Path, values: dict[str, Any]) -> None:
    objects = render(chart, values)
    validate_objects(objects)
    for version in KUBE_VERSIONS:
        report = helm.lint(str(CHART), values, namespace=NAMESPACE, kube_version=f"v{version}.0")
        errors = [m for m in report["messages"] if m["severity"] >= 3] + [{"error": e} for e in report["errors"]]
        expect(not errors, f"helm lint (Kubernetes {version}): {errors}")
    check_config(canaryd, one(objects, "Deployment"))
    check_invariants(chart.merge_values(values), objects)


def render_fails(chart: Any, values: dict[str, Any], error: type[Exception], message: str) -> None:
    """Helm refuses the values with `error` (the schema's HelmValuesError, a template's HelmRenderError)."""
    try:
        chart.render(values, name=RELEASE, namespace=NAMESPACE)
    except error as e:
        expect(message in str(e), f"Helm's message {str(e)!r} does not say {message!r}")
        return
    raise CheckFailed(f"the chart rendered {values}")


def crds_template_carries_the_generated_crds(chart: Any) -> None:
    generated = [d for d in yaml.load_all((CHART / "files" / "crds.yaml").read_text(), Loader=LOADER) if d]
    rendered = by_kind(render(chart, {}), "CustomResourceDefinition")
    expect(len(rendered) == len(generated) == 4, f"{len(rendered)} rendered, {len(generated)} generated")
    for want, got in zip(generated, rendered):
        meta = dict(got["metadata"])
        expect(meta.pop("annotations") == {"helm.sh/resource-policy": "keep"}, "unexpected annotations")
        expect(meta.pop("labels")["app.kubernetes.io/instance"] == RELEASE, "no chart labels")
        expect({**got, "metadata": meta} == want, f"{want['metadata']['name']} differs from files/crds.yaml")
    # Helm would install anything under crds/ unconditionally, defeating crds.install.
    expect(chart.crds == [], f"the chart has files under crds/: {[c['filename'] for c in chart.crds]}")


def versions_follow_the_crate() -> None:
    crate = tomllib.loads((ROOT / "Cargo.toml").read_text())["package"]["version"]
    meta = yaml.safe_load((CHART / "Chart.yaml").read_text())
    expect(meta["version"] == crate and meta["appVersion"] == crate,
           f"Chart.yaml version {meta['version']} / appVersion {meta['appVersion']} != Cargo.toml {crate}")


def leaf_paths(values: Any, prefix: str = "") -> list[str]:
    if isinstance(values, dict) and values:
        return [p for k, v in values.items() for p in leaf_paths(v, f"{prefix}{k}.")]
    return [prefix.rstrip(".")]


def readme_documents_every_value() -> None:
    readme = (CHART / "README.md").read_text()
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    # Kubernetes pass-through blocks are documented as one row each.
    whole = {"resources", "podSecurityContext", "securityContext", "livenessProbe", "readinessProbe"}
    paths = sorted({p.split(".")[0] if p.split(".")[0] in whole else p for p in leaf_paths(defaults)})
    missing = [p for p in paths if f"| `{p}` |" not in readme]
    expect(not missing, f"charts/canaryd/README.md's values table lacks {missing}")


EXAMPLE_APP = CHART / "examples" / "progressive-sync" / "app"


def progressive_sync_gate_renders_the_library_template(canaryd: Path) -> None:
    """The example app chart's gate is the shipped template as a per-revision AnalysisRun that canaryd accepts."""
    library = {d["metadata"]["name"]: d for d in yaml.safe_load_all(
        (ROOT / "analysis-templates" / "progressive-sync-gate.yaml").read_text()) if d}
    app = helm.Chart.load(str(EXAMPLE_APP))
    for template, extra in (("progressive-sync-gate", {}),
                            ("progressive-sync-gate-vs-baseline", {"baseline-clusters": "prod-us-.*"})):
        values = {"image": {"tag": "2.0.1"}, "gate": {"template": template,
                                                      "args": {"cluster": "prod-eu-1", **extra}}}
        objects = render(app, values)
        validate_objects([o for o in objects if o["kind"] != "AnalysisRun"])
        run = one(objects, "AnalysisRun")
        expect(run["metadata"]["name"] == "canaryd-gate-2.0.1", f"gate name {run['metadata']['name']}")
        expect(run["metadata"]["annotations"] == {"argocd.argoproj.io/sync-wave": "1"}, "not in sync wave 1")
        wanted = library[template]
        nested = [library[t["templateName"]] for t in wanted["spec"].get("templates", [])]
        metrics = [m for t in [*nested, wanted] for m in t["spec"]["metrics"]]
        expect(run["spec"]["metrics"] == metrics, f"{template}: the rendered metrics differ from the library's")
        args = {a["name"]: a["value"] for a in run["spec"]["args"]}
        expect(args["cluster"] == "prod-eu-1" and args["app"] == RELEASE, f"args {args}")
        path = Path(os.environ.get("TMPDIR", "/tmp")) / f"canaryd-gate-{os.getpid()}.yaml"
        path.write_text(yaml.safe_dump(run))
        try:
            done = subprocess.run([str(canaryd), "validate", str(path)], capture_output=True, text=True, timeout=60)
        finally:
            path.unlink()
        expect(done.returncode == 0, f"canaryd validate rejects the rendered gate: {done.stdout}{done.stderr}")
    report = helm.lint(str(EXAMPLE_APP), {"gate": {"args": {"cluster": "prod-eu-1"}}}, namespace=NAMESPACE)
    errors = [m for m in report["messages"] if m["severity"] >= 3] + [{"error": e} for e in report["errors"]]
    expect(not errors, f"helm lint of the example app: {errors}")
    render_fails(app, {}, helm.HelmRenderError, "gate.args.cluster is required")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--canaryd", type=Path, default=ROOT / "target" / "debug" / "canaryd")
    canaryd = parser.parse_args().canaryd
    started = time.monotonic()
    chart = helm.Chart.load(str(CHART))
    checks: list[tuple[str, Callable[[], None]]] = [
        ("the chart version and appVersion follow Cargo.toml", versions_follow_the_crate),
        ("the canaryd binary exists", lambda: expect(
            canaryd.is_file(), f"{canaryd} is missing: build it with `cargo build --locked --bin canaryd`")),
        ("the CRD template carries the generated CRDs with the keep annotation",
         lambda: crds_template_carries_the_generated_crds(chart)),
        ("check-config rejects a flag canaryd does not know, so the args check can fail", lambda: expect_rejected(
            canaryd, render(chart, {"extraArgs": ["--no-such-flag"]}))),
        ("the chart README documents every value", readme_documents_every_value),
        ("the progressive-sync example renders the library gate as an AnalysisRun canaryd accepts",
         lambda: progressive_sync_gate_renders_the_library_template(canaryd)),
    ]
    checks += [(name, (lambda v=values, e=error, m=message: render_fails(chart, v, e, m)))
               for name, values, error, message in REFUSED]
    checks += [(f"{name}: renders, lints, validates and passes check-config",
                (lambda v=values: check_value_set(chart, canaryd, v))) for name, values in MATRIX.items()]
    passed = failed = 0
    for name, check in checks:
        began = time.monotonic()
        try:
            check()
            passed += 1
            print(f"ok   {name} ({time.monotonic() - began:.1f}s)")
        except CheckFailed as e:
            failed += 1
            print(f"FAIL {name}: {e}")
        except Exception as e:  # noqa: BLE001 - a Helm or validator error fails the check, with its trace
            failed += 1
            print(f"FAIL {name}: {type(e).__name__}: {e}")
            traceback.print_exc()
    print(f"chart checks took {time.monotonic() - started:.1f}s", file=sys.stderr)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def expect_rejected(canaryd: Path, objects: list[dict[str, Any]]) -> None:
    try:
        check_config(canaryd, one(objects, "Deployment"))
    except CheckFailed as e:
        expect("--no-such-flag" in str(e) and "exited 2" in str(e), f"unexpected failure: {e}")
        return
    raise CheckFailed("canaryd accepted --no-such-flag")


if __name__ == "__main__":
    sys.exit(main())
