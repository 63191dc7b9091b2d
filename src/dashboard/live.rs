//! `GET /live[?namespace=NS]`: server-sent events from the Kubernetes watch. One stream per open page watches the
//! Rollouts, ReplicaSets and AnalysisRuns of the namespace (or of every one) and sends `change` after each
//! change, and once when each first list is in (so a change between the page's read and the watch is not
//! lost); the page's script then fetches itself again and swaps its content in. The watches end when the page
//! goes away (the body is dropped).

use std::convert::Infallible;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use http_body_util::{BodyExt, StreamBody};
use hyper::StatusCode;
use hyper::body::{Bytes, Frame};
use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;

use super::{Body, respond};
use crate::api::{AnalysisRun, Rollout};

/// How often an idle stream sends a comment, so proxies keep it open and a closed page is noticed.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

const CHANGE: &[u8] = b"data: change\n\n";
const COMMENT: &[u8] = b": keep-alive\n\n";

/// The event stream of the objects in `namespace` (every namespace when `None`).
pub fn stream(client: &kube::Client, namespace: Option<&str>) -> hyper::Response<Body> {
    let changes = futures::stream::select_all([
        changes::<Rollout>(client, namespace),
        changes::<ReplicaSet>(client, namespace),
        changes::<AnalysisRun>(client, namespace),
    ])
    .map(|()| Bytes::from_static(CHANGE));
    let keep_alive =
        futures::stream::unfold(crate::time::real_ticker(KEEP_ALIVE), |mut ticker| async {
            ticker.tick().await;
            Some((Bytes::from_static(COMMENT), ticker))
        });
    let events = futures::stream::select(changes, keep_alive)
        .map(|bytes| Ok::<_, Infallible>(Frame::data(bytes)));
    respond(
        StatusCode::OK,
        "text/event-stream",
        StreamBody::new(events).boxed_unsync(),
    )
}

/// One item per change to the objects of kind `K`, and one when their first list is in. A watch the API
/// server refuses is retried with the watcher's backoff.
fn changes<K>(client: &kube::Client, namespace: Option<&str>) -> BoxStream<'static, ()>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let api: Api<K> = match namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    };
    watcher(api, watcher::Config::default())
        .default_backoff()
        .filter_map(|event| async move {
            match event {
                Ok(
                    watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone,
                ) => Some(()),
                _ => None,
            }
        })
        .boxed()
}
