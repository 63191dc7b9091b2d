//! The object model: round trips that lose nothing, and the committed CRDs.

use std::path::Path;

use canaryd::api::decode::decode;
use canaryd::api::{AnalysisRun, AnalysisTemplate, ClusterAnalysisTemplate, Rollout};
use canaryd::cli::load::parse_documents;
use serde_json::Value;

/// Decodes `yaml` as `T`, re-encodes it, and asserts the JSON is exactly what was written.
fn assert_round_trip<T: serde::de::DeserializeOwned + serde::Serialize>(yaml: &str) {
    let (docs, err) = parse_documents(Path::new("t.yaml"), yaml);
    assert!(err.is_none(), "{err:?}");
    let written = &docs[0].value;
    let (typed, unknown) = decode::<T>(written).expect("decodes");
    assert!(unknown.is_empty(), "fields dropped: {unknown:?}");
    let back: Value = serde_json::to_value(&typed).expect("encodes");
    assert_eq!(&back, written);
}

const TEMPLATE_SPEC: &str = r#"
spec:
  args:
  - name: service
  - name: port
    value: "9090"
  - name: token
    valueFrom:
      secretKeyRef: {name: creds, key: token}
  - name: ns
    valueFrom:
      fieldRef: {fieldPath: metadata.namespace}
  dryRun:
  - metricName: latency.*
  measurementRetention:
  - metricName: .*
    limit: 20
  templates:
  - templateName: shared
  - templateName: global
    clusterScope: true
  metrics:
  - name: success-rate
    interval: 1m
    initialDelay: 30s
    count: "{{args.count}}"
    successCondition: result[0] >= 0.95
    failureCondition: result[0] < 0.9
    failureLimit: 3
    inconclusiveLimit: "2"
    consecutiveErrorLimit: 4
    consecutiveSuccessLimit: 0
    provider:
      prometheus:
        address: http://prometheus:9090
        query: sum(rate(x[1m]))
        timeout: 40
        insecure: true
        headers:
        - {key: X-Scope-OrgID, value: tenant}
        authentication:
          oauth2: {tokenUrl: "https://idp/token", clientId: id, clientSecret: "{{args.token}}", scopes: [a, b]}
          basicAuth: {username: u, password: p}
          sigv4: {region: eu-west-1, profile: p, roleArn: arn}
        rangeQuery: {start: now() - duration("5m"), end: now(), step: 1m}
  - name: smoke
    provider:
      web:
        method: POST
        url: http://svc/check
        headers: [{key: Content-Type, value: application/json}]
        jsonBody: {deep: {list: [1, "two", null]}}
        timeoutSeconds: 20
        jsonPath: "{$.ok}"
        insecure: false
  - name: plugin
    provider:
      plugin:
        canaryd/compare: {anything: {goes: [1, 2]}}
  - name: others
    provider:
      datadog: {query: "x", apiVersion: v2}
      newRelic: {query: y}
      wavefront: {query: z}
      kayenta: {application: a}
      job: {spec: {template: {spec: {containers: [{name: c, image: i}]}}}}
      cloudWatch: {interval: 5m}
      graphite: {query: q}
      influxdb: {query: q}
      skywalking: {query: q}
"#;

#[test]
fn an_analysis_template_round_trips_without_losing_a_field() {
    let yaml = format!(
        "apiVersion: argoproj.io/v1alpha1\nkind: AnalysisTemplate\nmetadata:\n  name: t\n  namespace: prod\n  labels: {{a: b}}\n  annotations: {{c: d}}\n{TEMPLATE_SPEC}"
    );
    assert_round_trip::<AnalysisTemplate>(&yaml);
}

#[test]
fn a_cluster_analysis_template_round_trips_without_losing_a_field() {
    let yaml = format!(
        "apiVersion: argoproj.io/v1alpha1\nkind: ClusterAnalysisTemplate\nmetadata:\n  name: t\n{TEMPLATE_SPEC}"
    );
    assert_round_trip::<ClusterAnalysisTemplate>(&yaml);
}

#[test]
fn an_analysis_run_round_trips_with_its_full_status() {
    assert_round_trip::<AnalysisRun>(
        r#"
apiVersion: argoproj.io/v1alpha1
kind: AnalysisRun
metadata:
  name: r
  namespace: prod
  resourceVersion: "42"
  ownerReferences:
  - {apiVersion: argoproj.io/v1alpha1, kind: Rollout, name: web, uid: "1234", controller: true}
spec:
  terminate: false
  ttlStrategy: {secondsAfterCompletion: 60, secondsAfterFailure: 600, secondsAfterSuccess: 30}
  args: [{name: service, value: web}]
  dryRun: [{metricName: x}]
  measurementRetention: [{metricName: x, limit: 3}]
  metrics:
  - name: x
    interval: 1m
    count: 3
    provider: {prometheus: {address: "http://p:9090", query: up}}
status:
  phase: Failed
  message: Metric "x" assessed Failed due to failed (1) > failureLimit (0)
  startedAt: "2026-12-02T10:00:00Z"
  completedAt: "2026-12-02T10:02:00Z"
  runSummary: {count: 1, successful: 0, failed: 1, inconclusive: 0, error: 0}
  dryRunSummary: {count: 0, successful: 0, failed: 0, inconclusive: 0, error: 0}
  metricResults:
  - name: x
    phase: Failed
    message: Metric "x" assessed Failed due to failed (1) > failureLimit (0)
    count: 1
    successful: 0
    failed: 1
    inconclusive: 0
    error: 0
    consecutiveError: 0
    consecutiveSuccess: 0
    dryRun: true
    metadata: {ResolvedPrometheusQuery: up}
    measurements:
    - phase: Failed
      startedAt: "2026-12-02T10:01:00Z"
      finishedAt: "2026-12-02T10:01:01Z"
      value: "[0.5]"
      message: m
      metadata: {warnings: w}
      resumeAt: "2026-12-02T10:01:30Z"
"#,
    );
}

#[test]
fn a_rollout_keeps_every_field_canaryd_does_not_read() {
    assert_round_trip::<Rollout>(
        r#"
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: web}
spec:
  replicas: 5
  revisionHistoryLimit: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: web:2
        futureField: {kept: true}
  strategy:
    canary:
      canaryService: web-canary
      trafficRouting: {istio: {virtualService: {name: web, routes: [primary]}}}
      analysis:
        templates: [{templateName: success-rate}]
        startingStep: 2
        args: [{name: service, value: web}, {name: hash, valueFrom: {podTemplateHashValue: Latest}}]
      steps:
      - setWeight: 20
      - pause: {duration: 10m}
      - analysis:
          templates: [{templateName: error-rate, clusterScope: true}]
          args: [{name: service, value: web}]
      - pause: {}
      - setCanaryScale: {weight: 20}
status:
  phase: Progressing
  currentStepIndex: 1
  canary: {weights: {canary: {weight: 20}, stable: {weight: 80}}}
"#,
    );
}

#[test]
fn every_traffic_router_and_the_weights_argo_wrote_round_trip_through_the_typed_rollout() {
    assert_round_trip::<Rollout>(
        r#"
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: web}
spec:
  strategy:
    canary:
      canaryService: web-canary
      stableService: web-stable
      scaleDownDelaySeconds: 45
      trafficRouting:
        maxTrafficWeight: 1000
        istio:
          virtualServices: [{name: a.mesh, routes: [primary], tlsRoutes: [{port: 443, sniHosts: [a]}], later: 1}]
          destinationRule: {name: dr, canarySubsetName: canary, stableSubsetName: stable, additionalSubsetNames: [x]}
        nginx: {stableIngresses: [web], annotationPrefix: custom, canaryIngressAnnotations: {a/b: c}}
        plugins:
          argoproj-labs/gatewayAPI: {httpRoutes: [{name: r, useHeaderRoutes: true}], namespace: gw}
          argoproj-labs/contour: {httpProxy: p}
        smi: {rootService: root}
        alb: {ingress: i, servicePort: 80}
        traefik: {weightedTraefikServiceName: t}
        managedRoutes: [{name: header}]
        somethingNew: {a: 1}
      steps:
      - setCanaryScale: {replicas: 2}
      - setWeight: 20
status:
  canary:
    weights:
      canary: {weight: 20, podTemplateHash: 6f8, serviceName: web-canary}
      stable: {weight: 80, podTemplateHash: 7c9, serviceName: web-stable}
      additional: [{weight: 5, serviceName: exp}]
      verified: true
"#,
    );
}

#[test]
fn a_rollout_status_written_by_argo_round_trips_with_its_types() {
    assert_round_trip::<Rollout>(
        r#"
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: web, generation: 4, annotations: {rollout.argoproj.io/revision: "2"}}
spec:
  replicas: 4
  progressDeadlineSeconds: 60
  progressDeadlineAbort: true
  paused: false
  strategy:
    canary:
      maxSurge: "25%"
      maxUnavailable: 0
      abortScaleDownDelaySeconds: 30
      steps:
      - setWeight: 20
      - pause: {duration: 10}
      - analysis:
          templates: [{templateName: rate}]
          args: [{name: hash, valueFrom: {podTemplateHashValue: Stable}}, {name: ns, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}]
          analysisRunMetadata: {labels: {team: a}}
          dryRun: [{metricName: x}]
      - experiment: {templates: [{name: baseline, specRef: stable}]}
status:
  HPAReplicas: 5
  abort: true
  abortedAt: "2026-01-01T00:00:00Z"
  availableReplicas: 4
  blueGreen: {}
  canary:
    currentStepAnalysisRunStatus: {name: web-6f8-2-2, status: Failed, message: boom}
  conditions:
  - {type: Progressing, status: "False", reason: RolloutAborted, message: "Rollout aborted update to revision 2", lastUpdateTime: "2026-01-01T00:00:00Z", lastTransitionTime: "2026-01-01T00:00:00Z"}
  controllerPause: true
  currentPodHash: 6f8
  currentStepHash: 5b4
  currentStepIndex: 0
  observedGeneration: "4"
  pauseConditions: [{reason: CanaryPauseStep, startTime: "2026-01-01T00:00:00Z"}]
  phase: Degraded
  message: "RolloutAborted: Rollout aborted update to revision 2"
  readyReplicas: 4
  replicas: 5
  selector: app=web
  stableRS: 7c9
  updatedReplicas: 1
  duration: {rolloutStartedAt: "2026-01-01T00:00:00Z"}
"#,
    );
}

#[test]
fn the_committed_crds_match_the_types() {
    let committed_path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/canaryd/files/crds.yaml");
    let committed =
        std::fs::read_to_string(&committed_path).expect("charts/canaryd/files/crds.yaml exists");
    let generated = canaryd::cli::crds::render().expect("renders");
    assert!(
        committed == generated,
        "charts/canaryd/files/crds.yaml is stale: run `cargo run -- crds > charts/canaryd/files/crds.yaml`"
    );
}

#[test]
fn the_template_crds_keep_plugin_fields_and_type_prometheus_queries() {
    // Names, scope, subresources and printer columns are compared with Argo's CRDs in tests/edges/crds.rs.
    let crds: Vec<Value> = canaryd::api::crds()
        .iter()
        .map(|c| serde_json::to_value(c).expect("json"))
        .collect();
    let by_name = |n: &str| {
        crds.iter()
            .find(|c| c["metadata"]["name"] == n)
            .expect(n)
            .clone()
    };
    let at = by_name("analysistemplates.argoproj.io");
    let cat = by_name("clusteranalysistemplates.argoproj.io");
    for crd in [&at, &cat] {
        let provider = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"]["metrics"]["items"]["properties"]["provider"]["properties"];
        assert_eq!(
            provider["plugin"]["x-kubernetes-preserve-unknown-fields"], true,
            "{provider}"
        );
        assert_eq!(
            provider["prometheus"]["properties"]["query"]["type"],
            "string"
        );
    }
}
