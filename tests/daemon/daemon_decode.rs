//! `canaryd run` with an AnalysisRun it cannot decode (a value its field cannot hold, which the CRD's schema
//! lets through: a count beyond 32 bits): the run is reported as it stands, and the watch and every other run
//! go on.

#![allow(clippy::disallowed_methods)] // Not the Clock: the fake API server and the harness wait on real time.

use std::time::Duration;

use canaryd::api::AnalysisPhase;
use canaryd_testkit::fake_apiserver::CrdSet;
use canaryd_testkit::harness::{self, Answer, create, run};
use canaryd_testkit::with_each_crd_set;
use k8s_openapi::api::events::v1::Event;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

/// An AnalysisRun as the API server may store it, whatever its fields hold.
mod raw {
    #[derive(
        kube::CustomResource,
        serde::Serialize,
        serde::Deserialize,
        Clone,
        Debug,
        schemars::JsonSchema,
    )]
    #[kube(
        group = "argoproj.io",
        version = "v1alpha1",
        kind = "AnalysisRun",
        namespaced
    )]
    pub struct AnyRunSpec {
        #[serde(flatten)]
        pub fields: serde_json::Map<String, serde_json::Value>,
    }
}

fn malformed(name: &str) -> raw::AnalysisRun {
    let mut object = raw::AnalysisRun::new(
        name,
        raw::AnyRunSpec {
            fields: serde_json::Map::new(),
        },
    );
    object.metadata.namespace = Some("default".into());
    // Both CRD sets declare `count` an int-or-string without bounds; canaryd (as Argo) holds an int32.
    object.spec.fields.insert(
        "metrics".into(),
        json!([{"name": "rate", "count": 1_099_511_627_776_i64, "provider": {"prometheus": {"query": "up"}}}]),
    );
    object
}

async fn a_run_that_cannot_be_decoded_is_reported_on_itself_and_the_others_still_complete(
    crds: CrdSet,
) {
    let (server, client, prom) = harness::cluster(crds, Answer::Scalar(1.0)).await;
    // One before the daemon starts (in its first list) and one after (a watch event).
    server.put(&malformed("listed-malformed"));
    let daemon = harness::spawn(client.clone(), harness::config()).await;
    server.put(&malformed("watched-malformed"));
    create(
        &client,
        &run(
            "healthy",
            &prom.uri(),
            json!({"successCondition": "result >= 0.5"}),
        ),
    )
    .await;
    let done = harness::finished(&server, "healthy", WAIT).await;
    assert_eq!(
        done.status.and_then(|s| s.phase),
        Some(AnalysisPhase::Successful)
    );
    for name in ["listed-malformed", "watched-malformed"] {
        let status = harness::eventually(WAIT, &format!("{name} to be reported"), || async {
            let stored = server.get_json::<raw::AnalysisRun>("default", name)?;
            let status = stored.get("status")?.clone();
            (status["phase"] == "Error").then_some(status)
        })
        .await;
        let message = status["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("cannot decode the AnalysisRun: spec.metrics[0].count: "),
            "{name}: the message names the field and what is wrong with it: {message}"
        );
    }
    // The Event follows the status: its publisher creates it on its own task.
    let events: kube::Api<Event> = kube::Api::namespaced(client.clone(), "default");
    harness::eventually(WAIT, "a Warning Event on the run", || async {
        let listed = events.list(&Default::default()).await.ok()?;
        listed
            .items
            .into_iter()
            .filter(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("watched-malformed")
            })
            .any(|e| e.reason.as_deref() == Some("AnalysisRunError"))
            .then_some(())
    })
    .await;
    assert!(
        daemon
            .metric("canaryd_reconcile_errors_total", &[("reason", "decode")])
            .await
            >= 2.0
    );
    daemon.stop().await;
}

with_each_crd_set!(
    a_run_that_cannot_be_decoded_is_reported_on_itself_and_the_others_still_complete
);
