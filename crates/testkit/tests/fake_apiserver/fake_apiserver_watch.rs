//! Faithfulness tests for the fake API server's watches (`canaryd_testkit::fake_apiserver`) through the real kube
//! client: event order, resume points, bookmarks, timeouts, 410 Expired, selectors, and kube-runtime's watcher
//! and Controller recovering from cut connections, expired history and server errors.

#![allow(clippy::disallowed_methods)] // Not the Clock: the fake API server keeps real time.

use std::sync::Arc;
use std::time::Duration;

use canaryd::api::{AnalysisRun, AnalysisRunSpec, Metric};
use canaryd_testkit::fake_apiserver::{FakeApiServer, RequestPattern};
use futures::{Stream, StreamExt};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher::{self, Event};
use serde_json::json;
use tokio::sync::mpsc;

const PATIENCE: Duration = Duration::from_secs(5);

fn run(name: &str) -> AnalysisRun {
    let metric = Metric {
        name: "success-rate".into(),
        ..Default::default()
    };
    AnalysisRun::new(
        name,
        AnalysisRunSpec {
            metrics: vec![metric],
            ..Default::default()
        },
    )
}

fn labelled(name: &str, app: &str) -> AnalysisRun {
    let mut object = run(name);
    object.metadata.labels = Some([("app".to_string(), app.to_string())].into());
    object
}

/// The next item, or a panic naming what was awaited: no test may hang on a silent stream.
async fn next<T>(stream: &mut (impl Stream<Item = T> + Unpin), awaited: &str) -> T {
    tokio::time::timeout(PATIENCE, stream.next())
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {awaited}"))
        .unwrap_or_else(|| panic!("the stream ended while waiting for {awaited}"))
}

/// A one-line summary of a raw watch event, for order assertions.
fn describe(event: &WatchEvent<AnalysisRun>) -> String {
    let name = |o: &AnalysisRun| o.metadata.name.clone().unwrap_or_default();
    match event {
        WatchEvent::Added(o) => format!("ADDED {}", name(o)),
        WatchEvent::Modified(o) => format!("MODIFIED {}", name(o)),
        WatchEvent::Deleted(o) => format!("DELETED {}", name(o)),
        WatchEvent::Bookmark(b) => format!("BOOKMARK {}", b.metadata.resource_version),
        WatchEvent::Error(e) => format!("ERROR {} {}", e.code, e.reason),
    }
}

async fn runs(server: &FakeApiServer) -> Api<AnalysisRun> {
    Api::namespaced(server.client().await, "default")
}

#[tokio::test]
async fn a_watch_reports_added_modified_deleted_in_order_after_the_given_version() {
    let server = FakeApiServer::start().await;
    let api = runs(&server).await;
    api.create(&PostParams::default(), &run("before"))
        .await
        .unwrap();
    let from = server.resource_version().to_string();
    let mut stream = api
        .watch(&WatchParams::default().disable_bookmarks(), &from)
        .await
        .unwrap()
        .boxed();

    api.create(&PostParams::default(), &run("canary-1"))
        .await
        .unwrap();
    // canaryd's AnalysisRun CRD, like Argo's, has no status subresource: status is written with the object.
    let patch = Patch::Merge(json!({ "status": { "phase": "Running" } }));
    let modified = api
        .patch("canary-1", &PatchParams::default(), &patch)
        .await
        .unwrap();
    api.delete("canary-1", &DeleteParams::default())
        .await
        .unwrap();

    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(describe(&next(&mut stream, "a watch event").await.unwrap()));
    }
    assert_eq!(
        seen,
        ["ADDED canary-1", "MODIFIED canary-1", "DELETED canary-1"]
    );
    let deleted_rv: u64 = server.resource_version();
    assert!(
        deleted_rv
            > modified
                .metadata
                .resource_version
                .unwrap()
                .parse::<u64>()
                .unwrap(),
        "delete bumps too"
    );
}

#[tokio::test]
async fn a_burst_of_changes_larger_than_one_chunk_arrives_whole_and_in_order() {
    let server = FakeApiServer::start().await;
    let api = runs(&server).await;
    let from = server.resource_version().to_string();
    // 60 runs of about 5 kB and one of 100 kB: 400 kB of events ready at once, several of the stream's
    // chunks of about 64 kB, one of them with a single event larger than a chunk.
    let names: Vec<String> = (0..61).map(|i| format!("big-{i:02}")).collect();
    for (i, name) in names.iter().enumerate() {
        let mut object = run(name);
        let size = if i == 30 { 100 << 10 } else { 5 << 10 };
        object.metadata.annotations = Some([("padding".to_string(), "x".repeat(size))].into());
        api.create(&PostParams::default(), &object).await.unwrap();
    }
    let mut stream = api
        .watch(&WatchParams::default().disable_bookmarks(), &from)
        .await
        .unwrap()
        .boxed();
    let mut seen = Vec::new();
    for _ in &names {
        seen.push(describe(&next(&mut stream, "a watch event").await.unwrap()));
    }
    let wanted: Vec<String> = names.iter().map(|n| format!("ADDED {n}")).collect();
    assert_eq!(seen, wanted);
}

#[tokio::test]
async fn a_watch_from_version_zero_starts_with_the_current_objects() {
    let server = FakeApiServer::start().await;
    let api = runs(&server).await;
    api.create(&PostParams::default(), &run("a")).await.unwrap();
    api.create(&PostParams::default(), &run("b")).await.unwrap();
    let mut stream = api
        .watch(&WatchParams::default().disable_bookmarks(), "0")
        .await
        .unwrap()
        .boxed();
    let first = describe(&next(&mut stream, "ADDED a").await.unwrap());
    let second = describe(&next(&mut stream, "ADDED b").await.unwrap());
    assert_eq!([first, second], ["ADDED a", "ADDED b"]);
}

#[tokio::test]
async fn watches_see_only_their_namespace_and_their_selector() {
    let server = FakeApiServer::start().await;
    let client = server.client().await;
    let default: Api<AnalysisRun> = Api::namespaced(client.clone(), "default");
    let other: Api<AnalysisRun> = Api::namespaced(client, "other");
    let from = server.resource_version().to_string();
    let params = WatchParams::default().labels("app=web").disable_bookmarks();
    let mut stream = default.watch(&params, &from).await.unwrap().boxed();

    other
        .create(&PostParams::default(), &labelled("elsewhere", "web"))
        .await
        .unwrap();
    default
        .create(&PostParams::default(), &labelled("api-run", "api"))
        .await
        .unwrap();
    default
        .create(&PostParams::default(), &labelled("web-run", "web"))
        .await
        .unwrap();
    let relabel = |app: &str| Patch::Merge(json!({ "metadata": { "labels": { "app": app } } }));
    default
        .patch("web-run", &PatchParams::default(), &relabel("api"))
        .await
        .unwrap();
    default
        .patch("api-run", &PatchParams::default(), &relabel("web"))
        .await
        .unwrap();

    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(describe(
            &next(&mut stream, "a selected event").await.unwrap(),
        ));
    }
    assert_eq!(
        seen,
        ["ADDED web-run", "DELETED web-run", "ADDED api-run"],
        "selector transitions"
    );
}

/// Every version but an object's latest is kept in the history as a past version (its metadata and its JSON):
/// a watch resumed from before them, and a reader of the history, still get each one whole.
#[tokio::test]
async fn past_versions_reach_a_resumed_watch_and_the_history_whole() {
    let server = FakeApiServer::start().await;
    let api = runs(&server).await;
    let from = server.resource_version();
    api.create(&PostParams::default(), &labelled("web-run", "web"))
        .await
        .unwrap();
    let write = |patch: serde_json::Value| {
        let api = api.clone();
        async move {
            api.patch("web-run", &PatchParams::default(), &Patch::Merge(patch))
                .await
                .unwrap()
        }
    };
    write(json!({ "status": { "phase": "Running" } })).await;
    write(
        json!({ "metadata": { "labels": { "app": "api" } }, "status": { "phase": "Successful" } }),
    )
    .await;
    write(json!({ "metadata": { "labels": { "app": "web" } } })).await;

    let params = WatchParams::default().labels("app=web").disable_bookmarks();
    let mut stream = api.watch(&params, &from.to_string()).await.unwrap().boxed();
    let mut seen = Vec::new();
    for _ in 0..4 {
        let event = next(&mut stream, "a past version").await.unwrap();
        let (WatchEvent::Added(run) | WatchEvent::Modified(run) | WatchEvent::Deleted(run)) =
            &event
        else {
            panic!("not an object's event: {}", describe(&event));
        };
        let phase = run
            .status
            .as_ref()
            .and_then(|s| s.phase.as_ref())
            .map(|p| format!("{p:?}"));
        seen.push(format!(
            "{} {phase:?} {} metric",
            describe(&event),
            run.spec.metrics.len()
        ));
    }
    assert_eq!(
        seen,
        [
            "ADDED web-run None 1 metric",
            "MODIFIED web-run Some(\"Running\") 1 metric",
            "DELETED web-run Some(\"Successful\") 1 metric",
            "ADDED web-run Some(\"Successful\") 1 metric",
        ],
        "each version whole, the selector's transitions read from the past versions' labels"
    );

    let mut history = Vec::new();
    server.versions_after::<AnalysisRun>(from, |_, version| {
        history.push(format!(
            "{} {} {}",
            version["metadata"]["labels"]["app"],
            version["status"]["phase"],
            version["spec"]["metrics"][0]["name"]
        ));
    });
    assert_eq!(
        history,
        [
            "\"web\" null \"success-rate\"",
            "\"web\" \"Running\" \"success-rate\"",
            "\"api\" \"Successful\" \"success-rate\"",
            "\"web\" \"Successful\" \"success-rate\"",
        ]
    );
}

#[tokio::test]
async fn a_watch_from_an_expired_version_gets_410_expired_in_the_stream() {
    let server = FakeApiServer::start().await;
    let api = runs(&server).await;
    api.create(&PostParams::default(), &run("canary-1"))
        .await
        .unwrap();
    let old = server.resource_version().to_string();
    server.expire_history();
    let mut stream = api
        .watch(&WatchParams::default(), &old)
        .await
        .unwrap()
        .boxed();
    let event = next(&mut stream, "the 410 ERROR event").await.unwrap();
    assert_eq!(describe(&event), "ERROR 410 Expired");
    let end = tokio::time::timeout(PATIENCE, stream.next())
        .await
        .expect("the stream ends after the error");
    assert!(end.is_none());
}

#[tokio::test]
async fn a_watch_older_than_the_history_window_gets_410() {
    let server = FakeApiServer::builder().history_limit(2).start().await;
    let api = runs(&server).await;
    let first = api.create(&PostParams::default(), &run("a")).await.unwrap();
    for name in ["b", "c", "d"] {
        api.create(&PostParams::default(), &run(name))
            .await
            .unwrap();
    }
    let mut stream = api
        .watch(
            &WatchParams::default(),
            &first.metadata.resource_version.unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    assert_eq!(
        describe(&next(&mut stream, "the 410 ERROR event").await.unwrap()),
        "ERROR 410 Expired"
    );
    let within = (server.resource_version() - 1).to_string();
    let mut stream = api
        .watch(&WatchParams::default().disable_bookmarks(), &within)
        .await
        .unwrap()
        .boxed();
    assert_eq!(
        describe(&next(&mut stream, "the retained change").await.unwrap()),
        "ADDED d"
    );
}

#[tokio::test]
async fn bookmarks_carry_the_latest_resource_version() {
    let server = FakeApiServer::builder()
        .bookmark_interval(Duration::from_millis(100))
        .start()
        .await;
    let api = runs(&server).await;
    let from = server.resource_version().to_string();
    let mut stream = api
        .watch(&WatchParams::default(), &from)
        .await
        .unwrap()
        .boxed();
    api.create(&PostParams::default(), &run("canary-1"))
        .await
        .unwrap();
    // A bookmark may come before the ADDED on a slow machine; the one after it must carry the newest version.
    let mut before = Vec::new();
    loop {
        let event = describe(&next(&mut stream, "ADDED").await.unwrap());
        if event == "ADDED canary-1" {
            break;
        }
        assert_eq!(
            event,
            format!("BOOKMARK {from}"),
            "only bookmarks of the start version come before"
        );
        before.push(event);
        assert!(before.len() < 50, "no ADDED after {before:?}");
    }
    let bookmark = describe(&next(&mut stream, "a BOOKMARK").await.unwrap());
    assert_eq!(bookmark, format!("BOOKMARK {}", server.resource_version()));

    let without = api
        .watch(
            &WatchParams::default().disable_bookmarks().timeout(1),
            &from,
        )
        .await
        .unwrap();
    let events: Vec<_> = tokio::time::timeout(PATIENCE, without.collect::<Vec<_>>())
        .await
        .unwrap();
    let kinds: Vec<_> = events
        .iter()
        .map(|e| describe(e.as_ref().unwrap()))
        .collect();
    assert_eq!(kinds, ["ADDED canary-1"], "no bookmarks unless asked for");
}

#[tokio::test]
async fn a_watch_ends_after_timeout_seconds() {
    let server = FakeApiServer::start().await;
    let api = runs(&server).await;
    let started = std::time::Instant::now();
    let stream = api
        .watch(&WatchParams::default().timeout(1).disable_bookmarks(), "0")
        .await
        .unwrap();
    let events: Vec<_> = tokio::time::timeout(PATIENCE, stream.collect::<Vec<_>>())
        .await
        .expect("the watch ends");
    assert!(events.is_empty());
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(server.open_watches(), 0);
}

#[tokio::test]
async fn a_dropped_server_refuses_connections() {
    let server = FakeApiServer::start().await;
    let api = runs(&server).await;
    let mut stream = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    drop(server);
    let end = tokio::time::timeout(PATIENCE, stream.next())
        .await
        .expect("the open watch ends");
    assert!(
        !matches!(end, Some(Ok(_))),
        "no event after the server stopped: {end:?}"
    );
    match api.list(&Default::default()).await {
        Err(kube::Error::Api(status)) => panic!("a stopped server answered {status:?}"),
        Err(_) => {}
        Ok(list) => panic!("a stopped server listed {} objects", list.items.len()),
    }
}

/// Wait until the watcher has an open watch, so a cut or an expiry hits a live stream.
async fn watching(server: &FakeApiServer) {
    for _ in 0..500 {
        if server.open_watches() > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the watcher never opened a watch");
}

/// Drive a kube-runtime watcher in its own task (it only makes progress while polled) and report each of its
/// events as a line: `Init`, `InitApply a`, `InitDone`, `Apply a`, `Delete a`, `Err ...`.
fn spawn_watcher(
    api: Api<AnalysisRun>,
    config: watcher::Config,
) -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut events = watcher::watcher(api, config).boxed();
        while let Some(event) = events.next().await {
            let name = |o: &AnalysisRun| o.metadata.name.clone().unwrap_or_default();
            let line = match event {
                Ok(Event::Apply(o)) => format!("Apply {}", name(&o)),
                Ok(Event::InitApply(o)) => format!("InitApply {}", name(&o)),
                Ok(Event::Delete(o)) => format!("Delete {}", name(&o)),
                Ok(Event::Init) => "Init".into(),
                Ok(Event::InitDone) => "InitDone".into(),
                Err(e) => format!("Err {e}"),
            };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// Read watcher lines until `wanted`; the lines before it are returned for inspection.
async fn until(lines: &mut mpsc::UnboundedReceiver<String>, wanted: &str) -> Vec<String> {
    let mut seen = Vec::new();
    for _ in 0..50 {
        let line = tokio::time::timeout(PATIENCE, lines.recv())
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {wanted}; saw {seen:?}"))
            .unwrap_or_else(|| {
                panic!("the watcher ended while waiting for {wanted}; saw {seen:?}")
            });
        if line == wanted {
            return seen;
        }
        seen.push(line);
    }
    panic!("never saw {wanted}; saw {seen:?}");
}

#[tokio::test]
async fn the_watcher_resumes_after_its_watch_connection_is_cut() {
    let server = FakeApiServer::start().await;
    let api = runs(&server).await;
    api.create(&PostParams::default(), &run("a")).await.unwrap();
    let mut lines = spawn_watcher(api.clone(), watcher::Config::default());
    until(&mut lines, "InitDone").await;
    watching(&server).await;

    server.drop_watches();
    api.create(&PostParams::default(), &run("b")).await.unwrap();
    let seen = until(&mut lines, "Apply b").await;
    assert!(
        !seen.iter().any(|s| s == "Init"),
        "a cut watch resumes without relisting: {seen:?}"
    );
    let lists = RequestPattern::new("GET", "/analysisruns").query("limit");
    assert_eq!(server.request_count(&lists), 1);
    assert_eq!(
        server.request_count(&RequestPattern::new("GET", "/analysisruns").query("watch=true")),
        2
    );
}

#[tokio::test]
async fn the_watcher_relists_after_410_and_continues() {
    let server = FakeApiServer::start().await;
    let api = runs(&server).await;
    api.create(&PostParams::default(), &run("a")).await.unwrap();
    let mut lines = spawn_watcher(api.clone(), watcher::Config::default());
    until(&mut lines, "InitDone").await;
    watching(&server).await;

    server.expire_history();
    server.drop_watches();
    let seen = until(&mut lines, "InitApply a").await;
    assert!(
        seen.iter().any(|s| s.contains("too old resource version")),
        "the watcher saw the 410: {seen:?}"
    );
    assert_eq!(
        seen.last().map(String::as_str),
        Some("Init"),
        "and relisted: {seen:?}"
    );
    until(&mut lines, "InitDone").await;
    api.create(&PostParams::default(), &run("b")).await.unwrap();
    until(&mut lines, "Apply b").await;
    let lists = RequestPattern::new("GET", "/analysisruns").query("limit");
    assert_eq!(server.request_count(&lists), 2);
}

#[tokio::test]
async fn the_watcher_reports_a_failed_list_and_retries_it() {
    let server = FakeApiServer::start().await;
    let api = runs(&server).await;
    api.create(&PostParams::default(), &run("a")).await.unwrap();
    server.fail_next(RequestPattern::new("GET", "/analysisruns"), 1, 500);
    let mut lines = spawn_watcher(api, watcher::Config::default());
    let seen = until(&mut lines, "InitApply a").await;
    assert!(
        seen.iter()
            .any(|s| s.starts_with("Err") && s.contains("500")),
        "the 500 reached the watcher: {seen:?}"
    );
}

#[tokio::test]
async fn a_streaming_list_watcher_gets_the_initial_events_then_init_done() {
    let server = FakeApiServer::start().await;
    let api = runs(&server).await;
    api.create(&PostParams::default(), &run("a")).await.unwrap();
    let mut lines = spawn_watcher(api.clone(), watcher::Config::default().streaming_lists());
    assert_eq!(until(&mut lines, "InitDone").await, ["Init", "InitApply a"]);
    api.create(&PostParams::default(), &run("b")).await.unwrap();
    until(&mut lines, "Apply b").await;
    let streaming = RequestPattern::new("GET", "/analysisruns").query("sendInitialEvents=true");
    assert_eq!(server.request_count(&streaming), 1);
    assert_eq!(
        server.request_count(&RequestPattern::new("GET", "/analysisruns").query("limit")),
        0
    );
}

#[derive(Debug, thiserror::Error)]
#[error("never")]
struct NoError;

#[tokio::test]
async fn a_controller_reconciles_each_analysis_run_through_the_fake() {
    let server = FakeApiServer::start().await;
    let api: Api<AnalysisRun> = Api::all(server.client().await);
    let namespaced = runs(&server).await;
    namespaced
        .create(&PostParams::default(), &run("a"))
        .await
        .unwrap();
    namespaced
        .create(&PostParams::default(), &run("b"))
        .await
        .unwrap();
    let reconcile = |object: Arc<AnalysisRun>, _: Arc<()>| async move {
        let _ = object;
        Ok::<_, NoError>(Action::await_change())
    };
    let error_policy = |_: Arc<AnalysisRun>, _: &NoError, _: Arc<()>| Action::await_change();
    let mut reconciled = Controller::new(api, watcher::Config::default())
        .run(reconcile, error_policy, Arc::new(()))
        .boxed();
    let mut names = Vec::new();
    for _ in 0..2 {
        let (object, _) = next(&mut reconciled, "a reconcile").await.unwrap();
        names.push(object.name);
    }
    names.sort();
    assert_eq!(names, ["a", "b"]);
}
