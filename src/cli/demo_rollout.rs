//! `canaryd demo`'s default: a Rollout of the demo's checkout service (setWeight 20, pause 5m, a
//! success-rate analysis, setWeight 50, ...) behind an Istio VirtualService, rehearsed on a virtual clock
//! with the scenario standing in for Prometheus, exactly as `canaryd rehearse` plays a Rollout: the
//! weights the VirtualService is given at each step, each measurement, and the abort with its reason (or
//! the promotion). With `--strategy bluegreen`, the same service as a blue-green Rollout whose preview is
//! checked by the same analysis before the active Service is switched to it. Owns the demo's Rollouts only;
//! the playing is `rehearsal`'s and the printing `rehearse`'s.

use std::path::Path;
use std::sync::Arc;

use super::demo_scenario::{SUCCESS_RATE, Scenario, ScenarioName, StandIn};
use super::rehearse::setup_from_docs;
use super::rehearse_report;
use super::report_file::ReportFile;
use super::{Exit, OutputFormat, load};
use crate::measure::Providers;
use crate::rehearsal::Options;

/// The demo's Rollout up to its strategy, which both strategies' Rollouts share.
macro_rules! demo_rollout_head {
    () => {
        r#"apiVersion: argoproj.io/v1alpha1
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
"#
    };
}

/// The demo's Rollout and VirtualService, as a user would write them.
pub const ROLLOUT: &str = concat!(
    demo_rollout_head!(),
    r#"    canary:
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
"#
);

/// The demo's blue-green Rollout: the new pods behind `checkout-preview` are checked by the success-rate
/// analysis before `checkout-active` is switched to them.
pub const BLUE_GREEN_ROLLOUT: &str = concat!(
    demo_rollout_head!(),
    r#"    blueGreen:
      activeService: checkout-active
      previewService: checkout-preview
      prePromotionAnalysis:
        templates:
        - templateName: success-rate
        args:
        - name: service
          value: checkout-preview
        - name: namespace
          value: shop
"#
);

/// The demo's Rollout strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Strategy {
    /// Canary steps behind an Istio VirtualService.
    Canary,
    /// A preview checked by the analysis before the active Service is switched to it.
    Bluegreen,
}

/// Plays the demo's Rollout of `strategy` through `scenario`.
pub async fn run(
    scenario: Scenario,
    strategy: Strategy,
    output: OutputFormat,
    report: Option<ReportFile>,
) -> Exit {
    let rollout = match strategy {
        Strategy::Canary => ROLLOUT,
        Strategy::Bluegreen => BLUE_GREEN_ROLLOUT,
    };
    let mut docs = Vec::new();
    for (file, text) in [
        ("checkout-rollout.yaml", rollout),
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
        if strategy == Strategy::Bluegreen {
            say!(
                "canaryd demo: blue-green Rollout shop/checkout ships revision 2 at {from} behind the preview \
                 Service checkout-preview;\nthe success-rate analysis (analysis-templates/success-rate.yaml, \
                 threshold 0.99) checks it before checkout-active is switched to it.\nThe preview is {story};\n\
                 the scenario stands in for Prometheus on a virtual clock.\n"
            );
        } else {
            say!(
                "canaryd demo: Rollout shop/checkout ships revision 2 at {from}: setWeight 20, pause 5m, the \
             success-rate analysis\n(analysis-templates/success-rate.yaml, threshold 0.99), setWeight 50, ... \
             through the Istio VirtualService checkout.\nThe canary is {story};\nthe scenario stands in for \
             Prometheus on a virtual clock.\n"
            );
        }
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
