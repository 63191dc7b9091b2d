//! `canaryd demo`'s default: a Rollout of the demo's checkout service (setWeight 20, pause 5m, a
//! success-rate analysis, setWeight 50, ...) behind an Istio VirtualService, rehearsed on a virtual clock
//! with the scenario standing in for Prometheus, exactly as `canaryd rehearse` plays a Rollout: the
//! weights the VirtualService is given at each step, each measurement, and the abort with its reason (or
//! the promotion). Owns the demo's Rollout only; the playing is `rehearsal`'s and the printing `rehearse`'s.

use std::path::Path;
use std::sync::Arc;

use super::demo_scenario::{SUCCESS_RATE, Scenario, ScenarioName, StandIn};
use super::rehearse::setup_from_docs;
use super::rehearse_report;
use super::report_file::ReportFile;
use super::{Exit, OutputFormat, load};
use crate::measure::Providers;
use crate::rehearsal::Options;

/// The demo's Rollout and VirtualService, as a user would write them.
pub const ROLLOUT: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: checkout
  namespace: shop
spec:
  replicas: 5
  selector:
    matchLabels:
      app: checkout
  template:
    metadata:
      labels:
        app: checkout
    spec:
      containers:
      - name: checkout
        image: shop/checkout:2.0.0
  strategy:
    canary:
      canaryService: checkout-canary
      stableService: checkout-stable
      trafficRouting:
        istio:
          virtualService:
            name: checkout
            routes:
            - primary
      steps:
      - setWeight: 20
      - pause:
          duration: 5m
      - analysis:
          templates:
          - templateName: success-rate
          args:
          - name: service
            value: checkout-canary
          - name: namespace
            value: shop
      - setWeight: 50
      - pause:
          duration: 5m
      - setWeight: 80
      - pause:
          duration: 5m
---
apiVersion: networking.istio.io/v1beta1
kind: VirtualService
metadata:
  name: checkout
  namespace: shop
spec:
  hosts:
  - checkout.shop.svc.cluster.local
  http:
  - name: primary
    route:
    - destination:
        host: checkout-stable
      weight: 100
    - destination:
        host: checkout-canary
      weight: 0
"#;

/// Plays the demo's Rollout through `scenario`.
pub async fn run(scenario: Scenario, output: OutputFormat, report: Option<ReportFile>) -> Exit {
    let mut docs = Vec::new();
    for (file, text) in [
        ("checkout-rollout.yaml", ROLLOUT),
        ("analysis-templates/success-rate.yaml", SUCCESS_RATE),
    ] {
        let (parsed, error) = load::parse_documents(Path::new(file), text);
        if let Some(e) = error {
            eprintln!("canaryd demo: the built-in {file} does not parse: {e}");
            return Exit::Error;
        }
        docs.extend(parsed);
    }
    let setup = match setup_from_docs(&docs, None, &[], None) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("canaryd demo: the built-in Rollout is refused: {}", e.0);
            return Exit::Error;
        }
    };
    let (from, _) = scenario.analysis_window();
    if output == OutputFormat::Text {
        let story = match scenario.name {
            ScenarioName::Degrading => {
                "fine (0.8% errors) until 00:08, 6 minutes after it ships, then at 12%"
            }
            ScenarioName::Healthy => "steady at 0.8% errors",
        };
        say!(
            "canaryd demo: Rollout shop/checkout ships revision 2 at {from}: setWeight 20, pause 5m, the \
             success-rate analysis\n(analysis-templates/success-rate.yaml, threshold 0.99), setWeight 50, ... \
             through the Istio VirtualService checkout.\nThe canary is {story};\nthe scenario stands in for \
             Prometheus on a virtual clock.\n"
        );
    }
    let providers = Providers::new(None).with_prometheus(Arc::new(StandIn(scenario)));
    let opts = Options {
        from,
        to: None,
        ready_after: jiff::SignedDuration::ZERO,
        promote_after: None,
    };
    rehearse_report::show(&setup, &providers, &opts, output, report).await
}
