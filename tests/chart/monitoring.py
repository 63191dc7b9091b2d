"""The chart's monitoring objects, for verify.py: the Grafana dashboards ConfigMap and the PrometheusRule.

The dashboards ConfigMap must carry every file of charts/canaryd/dashboards/ unchanged under Grafana's sidecar
label. The PrometheusRule is validated against the vendored prometheusrule.schema.json, its rule file passes
`promtool check rules`, and `promtool test rules` feeds each alert the series the daemon serves and checks it
fires for what it is meant to, scoped to the release's job, and stays quiet otherwise. (That the daemon serves
those series under those names is tests/daemon/daemon_metrics.rs's part.)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Callable

import yaml

HERE = Path(__file__).resolve().parent
DASHBOARDS = HERE.parents[1] / "charts" / "canaryd" / "dashboards"
PROMETHEUS_RULE_SCHEMA = json.loads((HERE / "prometheusrule.schema.json").read_text())

Expect = Callable[[bool, str], None]


def check_dashboards(objects: list[dict[str, Any]], values: dict[str, Any], expect: Expect) -> None:
    """With dashboards.enabled, one ConfigMap labelled for the sidecar holds each dashboard file unchanged."""
    wanted = values["dashboards"]
    maps = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-dashboards")]
    expect(len(maps) == int(wanted["enabled"]), f"{len(maps)} dashboards ConfigMaps with enabled={wanted['enabled']}")
    if not maps:
        return
    labels = maps[0]["metadata"]["labels"]
    expect(labels.get(wanted["label"]) == wanted["labelValue"],
           f"the ConfigMap's labels {labels} lack {wanted['label']}={wanted['labelValue']!r}")
    files = sorted(DASHBOARDS.glob("*.json"))
    expect(bool(files), f"no dashboards in {DASHBOARDS}")
    data = maps[0]["data"]
    expect(sorted(data) == [f.name for f in files], f"the ConfigMap holds {sorted(data)}")
    for f in files:
        expect(json.loads(data[f.name]) == json.loads(f.read_text()), f"{f.name} differs in the ConfigMap")


def check_rules(objects: list[dict[str, Any]], values: dict[str, Any], job: str, expect: Expect) -> None:
    """With prometheusRule.enabled, the rules pass promtool's check and each alert's unit test."""
    rules = [o for o in objects if o["kind"] == "PrometheusRule"]
    expect(len(rules) == int(values["prometheusRule"]["enabled"]), "PrometheusRule switch ignored")
    if not rules:
        return
    promtool = shutil.which("promtool")
    expect(promtool is not None, "promtool is missing: tests/run.sh installs Debian's prometheus package")
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        rule_file = Path(tmp) / "rules.yaml"
        rule_file.write_text(yaml.safe_dump(rules[0]["spec"]))
        done = subprocess.run([promtool, "check", "rules", str(rule_file)], capture_output=True, text=True,
                              timeout=60)
        expect(done.returncode == 0, f"promtool check rules: {done.stdout}{done.stderr}")
        # The unit tests compare annotations too; their templates are checked above, so the tests go without.
        bare = json.loads(json.dumps(rules[0]["spec"]))
        for group in bare["groups"]:
            for rule in group["rules"]:
                rule.pop("annotations", None)
        (Path(tmp) / "bare.yaml").write_text(yaml.safe_dump(bare))
        tests = Path(tmp) / "tests.yaml"
        tests.write_text(yaml.safe_dump(unit_tests(job)))
        done = subprocess.run([promtool, "test", "rules", str(tests)], capture_output=True, text=True,
                              timeout=60, cwd=tmp)
        expect(done.returncode == 0, f"promtool test rules: {done.stdout}{done.stderr}")


def unit_tests(job: str) -> dict[str, Any]:
    """Each alert fires on the series it watches (after the default `for`), only for the release's job; none
    fires on a healthy daemon's series."""
    def info(phase: str, name: str, of_job: str = job) -> str:
        return (f'rollout_info{{job="{of_job}",namespace="shop",name="{name}",strategy="canary",'
                f'traffic_router="",phase="{phase}"}}')

    settled = "30m"  # past every `for`
    healthy = {
        "interval": "1m",
        "input_series": [
            {"series": info("Completed", "web"), "values": "1x40"},
            {"series": info("Abort", "other", "someone-else"), "values": "1x40"},
            {"series": f'analysis_run_info{{job="{job}",namespace="shop",name="web-1",phase="Successful"}}',
             "values": "1x40"},
            {"series": f'canaryd_leader{{job="{job}",instance="a"}}', "values": "1x40"},
            {"series": f'canaryd_leader{{job="{job}",instance="b"}}', "values": "0x40"},
            {"series": f'canaryd_reconcile_errors_total{{job="{job}",reason="event"}}', "values": "3x40"},
        ],
        "alert_rule_test": [{"eval_time": settled, "alertname": a, "exp_alerts": []} for a in ALERTS],
    }
    troubled = {
        "interval": "1m",
        "input_series": [
            {"series": info("Abort", "aborted"), "values": "1x40"},
            {"series": info("Timeout", "stuck"), "values": "1x40"},
            {"series": f'analysis_run_info{{job="{job}",namespace="shop",name="web-2",phase="Error"}}',
             "values": "1x40"},
            {"series": f'canaryd_leader{{job="{job}",instance="a"}}', "values": "0x40"},
            {"series": f'canaryd_reconcile_errors_total{{job="{job}",reason="event"}}', "values": "0+1x40"},
        ],
        "alert_rule_test": [
            {"eval_time": settled, "alertname": "CanarydRolloutDegraded", "exp_alerts": [
                {"exp_labels": {"severity": "warning", "namespace": "shop", "name": "aborted", "phase": "Abort"}}]},
            {"eval_time": settled, "alertname": "CanarydRolloutProgressDeadlineExceeded", "exp_alerts": [
                {"exp_labels": {"severity": "warning", "namespace": "shop", "name": "stuck"}}]},
            {"eval_time": settled, "alertname": "CanarydAnalysisRunError", "exp_alerts": [
                {"exp_labels": {"severity": "warning", "namespace": "shop", "name": "web-2"}}]},
            {"eval_time": settled, "alertname": "CanarydNoLeader", "exp_alerts": [
                {"exp_labels": {"severity": "critical"}}]},
            {"eval_time": settled, "alertname": "CanarydEventsLost", "exp_alerts": [
                {"exp_labels": {"severity": "warning", "job": job, "reason": "event"}}]},
            # Before `for` has passed, a degraded Rollout has not fired yet.
            {"eval_time": "1m", "alertname": "CanarydRolloutDegraded", "exp_alerts": []},
        ],
    }
    # No daemon scraped at all is no leader either.
    gone = {
        "interval": "1m",
        "input_series": [{"series": 'up{job="prometheus"}', "values": "1x40"}],
        "alert_rule_test": [{"eval_time": settled, "alertname": "CanarydNoLeader", "exp_alerts": [
            {"exp_labels": {"severity": "critical", "job": job}}]}],
    }
    return {"rule_files": ["bare.yaml"], "evaluation_interval": "1m", "tests": [healthy, troubled, gone]}


ALERTS = ["CanarydRolloutDegraded", "CanarydRolloutProgressDeadlineExceeded", "CanarydAnalysisRunError",
          "CanarydNoLeader", "CanarydEventsLost"]
