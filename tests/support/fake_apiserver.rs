//! A stateful fake Kubernetes API server over plain HTTP, for tests of canaryd's kube client code (no real API
//! server can run on the test machines). TEST FIXTURE ONLY: it owns storage, the REST verbs, watches, discovery
//! and fault injection, and must stay faithful to kube-apiserver's documented behaviour for what canaryd uses.
//! It must not grow product logic, and it never talks to anything but its own loopback socket.
//!
//! # Use
//!
//! ```ignore
//! #[path = "support/fake_apiserver.rs"]
//! mod fake_apiserver;
//! use fake_apiserver::{FakeApiServer, RequestPattern};
//!
//! let server = FakeApiServer::start().await;           // 127.0.0.1, free port; stops on Drop
//! let client: kube::Client = server.client().await;    // through the kubeconfig file it wrote
//! // or: KUBECONFIG=server.kubeconfig_path() for a child process such as `canaryd run`
//! ```
//!
//! - `FakeApiServer::builder().resource(def).bookmark_interval(d).history_limit(n).start().await` — more
//!   resource kinds (`ResourceDef`), BOOKMARK period (default 1 s), retained watch history (default 10 000 changes).
//! - Argo's kinds come from CRD files: canaryd's generated ones by default, `.crds(CrdSet::Argo)` for Argo
//!   Rollouts' published ones, `.crd_file(path)` for any other CRD (a kind it defines replaces the one of the same
//!   group, version and plural). `install_crds(path)` swaps definitions while the server runs.
//! - `url()`, `kubeconfig_path()`, `client().await`.
//! - Introspection: `requests()`, `request_count(&RequestPattern)`, `resource_version()`, `open_watches()`,
//!   `get::<K>(ns, name)`, `get_json::<K>(ns, name)`, `put::<K>(&obj)` (stores status too, bumps the
//!   resourceVersion and notifies watches, as if another client wrote it).
//! - Faults: `fail_next(pattern, times, status)` (500, 503, 429 with `Retry-After: 1`, ...), `delay_next(pattern,
//!   times, delay)`, `drop_watches()` (every open watch connection is cut mid-stream), `expire_history()` (a new
//!   watch from an older resourceVersion gets 410 Expired, and so does the very next watch from any, so that a
//!   caught-up client must relist once; open watches continue), `conflict_next_write::<K>(ns, name)` (next
//!   update/patch of that object gets 409 Conflict). `RequestPattern::new("PATCH", "/analysisruns/")` matches a
//!   method ("*" for any) and a path substring; `.query("watch=true")` adds a query substring.
//! - kube's client retries 429, 503 and 504 by itself (up to 15 times, honouring `Retry-After`): a single
//!   injected 503 is invisible to the caller, a 500 is not.
//!
//! # What it implements
//!
//! Discovery (`/version`, `/api`, `/apis`, `/api/v1`, `/apis/GROUP/VERSION`); for every resource: list (list
//! `resourceVersion`, `labelSelector` with `=`, `==`, `!=`, `in`, `notin`, `key`, `!key`; `fieldSelector` on
//! `metadata.name`/`metadata.namespace`), watch (`resourceVersion`, `allowWatchBookmarks`, `timeoutSeconds`,
//! `sendInitialEvents`, 410 Expired as an in-stream ERROR event as kube-apiserver sends it, selector
//! transitions seen as ADDED/DELETED), get, create
//! (`generateName`, 409 AlreadyExists, status dropped where status is a subresource, 500 when a
//! resourceVersion is sent), update (409 Conflict on a stale `metadata.resourceVersion`; 422 without one for
//! custom resources and Leases; PUT creates an absent Lease), patch (merge RFC 7386, JSON RFC 6902 including
//! `test`, strategic merge, server-side apply), delete (preconditions, finalizers → `deletionTimestamp`; custom
//! resources answer with the deleted object, built-in kinds with a Success Status), and the `/status` subresource
//! where the kind's CRD declares one (writes there change only `.status`; writes to the object ignore `.status`;
//! without one, `/status` is 404 and status is written with the object, as any other field). Custom resources
//! are pruned and validated against their CRD's `openAPIV3Schema` on every write (see `fake_apiserver/schema.rs`
//! for what is checked): a wrong type is 422 Invalid naming the field, as kube-apiserver words it. Every write bumps one global
//! resourceVersion; no-op writes do not. Server-set metadata: uid, creationTimestamp, resourceVersion,
//! namespace, generation (custom resources; bumped on changes outside metadata and status).
//!
//! # Documented simplifications
//!
//! - Strategic merge patch is applied as a JSON merge patch: lists are replaced, never merged by key.
//! - Server-side apply is a JSON merge patch of the sent fields (JSON bodies only, `fieldManager` required as
//!   the real server requires it); no managedFields, no ownership conflicts, fields left out are not removed.
//! - `limit`/`continue` are ignored (one page holds everything, which the API allows); list `resourceVersion`
//!   and `resourceVersionMatch` parameters are ignored (lists are always current).
//! - core/v1 Events and events.k8s.io/v1 Events are stored separately; built-in kinds are not validated; no
//!   admission webhooks, no defaulting from CRD schemas, no `scale` subresource.

#![allow(dead_code)] // Each test binary includes this fixture and uses a different part of it.

#[path = "fake_apiserver/crd.rs"]
mod crd;
#[path = "fake_apiserver/schema.rs"]
mod schema;
#[path = "fake_apiserver/selector.rs"]
mod selector;
#[path = "fake_apiserver/store.rs"]
mod store;
#[path = "fake_apiserver/watch.rs"]
mod watch;

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use crd::CrdSet;
use selector::{FieldSelector, LabelSelector};
#[allow(unused_imports)] // Only fake_apiserver_crud's property test calls it directly.
pub use store::merge_patch;
use store::{ApiError, Deletion, PatchKind, Store, Stored, Target};

type Body = BoxBody<Bytes, io::Error>;

/// One kind of object the fake serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceDef {
    /// "" for the core group.
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub status_subresource: bool,
    /// A custom resource: `metadata.generation` is kept.
    pub custom: bool,
    /// A PUT without `metadata.resourceVersion` is accepted (true for most built-in kinds; false for custom
    /// resources and Leases, which answer 422 "must be specified for an update").
    pub unconditional_update: bool,
    /// A PUT of an absent object creates it (Leases); otherwise it is 404.
    pub create_on_update: bool,
    /// The CRD's `openAPIV3Schema`: writes are pruned and validated against it. `None` for built-in kinds.
    pub schema: Option<&'static Value>,
}

impl ResourceDef {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The storage key's first part, e.g. `argoproj.io/v1alpha1/analysisruns` or `v1/secrets`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.api_version(), self.plural)
    }

    /// How kube-apiserver names the resource in messages: `analysisruns.argoproj.io`, `secrets`.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_owned()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// What canaryd reads and writes: Argo's kinds as canaryd's own CRDs define them, Secrets, Events (both
    /// APIs), ConfigMaps and Leases.
    pub fn defaults() -> Vec<ResourceDef> {
        let builtin = |group, version, plural, singular, kind| ResourceDef {
            group,
            version,
            plural,
            singular,
            kind,
            namespaced: true,
            status_subresource: false,
            custom: false,
            unconditional_update: true,
            create_on_update: false,
            schema: None,
        };
        let mut all = CrdSet::Canaryd.resources();
        all.extend([
            builtin("", "v1", "secrets", "secret", "Secret"),
            builtin("", "v1", "configmaps", "configmap", "ConfigMap"),
            builtin("", "v1", "events", "event", "Event"),
            builtin("events.k8s.io", "v1", "events", "event", "Event"),
            ResourceDef {
                unconditional_update: false,
                create_on_update: true,
                ..builtin("coordination.k8s.io", "v1", "leases", "lease", "Lease")
            },
        ]);
        all
    }
}

/// Adds `resource` to `resources`, in place of the one with the same group, version and plural if any (a CRD
/// replaced by another).
fn define(resources: &mut Vec<ResourceDef>, resource: ResourceDef) {
    match resources.iter_mut().find(|r| r.id() == resource.id()) {
        Some(known) => *known = resource,
        None => resources.push(resource),
    }
}

/// Which requests a fault or a count applies to: a method ("*" for any), a path substring, a query substring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestPattern {
    method: String,
    path_contains: String,
    query_contains: String,
}

impl RequestPattern {
    pub fn new(method: &str, path_contains: &str) -> Self {
        RequestPattern {
            method: method.to_uppercase(),
            path_contains: path_contains.into(),
            query_contains: String::new(),
        }
    }

    pub fn query(mut self, query_contains: &str) -> Self {
        self.query_contains = query_contains.into();
        self
    }

    fn matches(&self, request: &RecordedRequest) -> bool {
        (self.method == "*" || self.method == request.method)
            && request.path.contains(&self.path_contains)
            && request.query.contains(&self.query_contains)
    }
}

/// A request as the fake received it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// The raw query string, percent-encoded as sent.
    pub query: String,
    /// When it arrived.
    pub at: jiff::Timestamp,
}

#[derive(Clone, Debug)]
enum FaultAction {
    Status(u16),
    Delay(Duration),
}

#[derive(Clone, Debug)]
struct Fault {
    pattern: RequestPattern,
    remaining: usize,
    action: FaultAction,
}

#[derive(Default)]
struct Control {
    faults: Vec<Fault>,
    requests: Vec<RecordedRequest>,
}

/// State shared by the accept loop, connection tasks, watch tasks and the test's handle.
struct Shared {
    /// Replaced at run time by `install_crds`, as a cluster's CRDs can be.
    resources: Mutex<Vec<ResourceDef>>,
    store: Mutex<Store>,
    control: Mutex<Control>,
    /// Ticks after every write and every `drop_watches`, waking watch tasks.
    signal: tokio::sync::watch::Sender<u64>,
    shutdown: tokio::sync::watch::Sender<bool>,
    open_watches: AtomicUsize,
    bookmark_interval: Duration,
    address: SocketAddr,
}

impl Shared {
    /// A panic in a test thread must not wedge the fixture, so a poisoned lock is taken as is.
    fn lock_store(&self) -> MutexGuard<'_, Store> {
        self.store
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn lock_control(&self) -> MutexGuard<'_, Control> {
        self.control
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Every store mutation goes through here so that watches hear of it.
    fn write<T>(&self, change: impl FnOnce(&mut Store) -> T) -> T {
        let result = change(&mut self.lock_store());
        self.signal.send_modify(|tick| *tick += 1);
        result
    }

    fn lock_resources(&self) -> MutexGuard<'_, Vec<ResourceDef>> {
        self.resources
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn resource(&self, group: &str, version: &str, plural: &str) -> Option<ResourceDef> {
        self.lock_resources()
            .iter()
            .find(|r| r.group == group && r.version == version && r.plural == plural)
            .cloned()
    }

    fn resource_of<K: kube::Resource<DynamicType = ()>>(&self) -> ResourceDef {
        let (group, version, plural) = (K::group(&()), K::version(&()), K::plural(&()));
        self.resource(&group, &version, &plural).unwrap_or_else(|| {
            panic!(
                "the fake API server has no resource {group}/{version}/{plural}: add a ResourceDef"
            )
        })
    }
}

/// Options for a fake API server; `FakeApiServer::start()` takes the defaults.
pub struct FakeApiServerBuilder {
    resources: Vec<ResourceDef>,
    bookmark_interval: Duration,
    history_limit: usize,
}

impl FakeApiServerBuilder {
    /// Serves `resource` too, in place of a kind with the same group, version and plural.
    pub fn resource(mut self, resource: ResourceDef) -> Self {
        define(&mut self.resources, resource);
        self
    }

    /// Serves the kinds of `set` as its CRDs define them, in place of the default (canaryd's).
    pub fn crds(self, set: CrdSet) -> Self {
        set.files().iter().fold(self, |b, file| b.crd_file(file))
    }

    /// Serves the kinds the CRDs in `file` define, in place of those with the same group, version and plural.
    pub fn crd_file(self, file: &Path) -> Self {
        crd::load(file).into_iter().fold(self, Self::resource)
    }

    pub fn bookmark_interval(mut self, interval: Duration) -> Self {
        self.bookmark_interval = interval;
        self
    }

    pub fn history_limit(mut self, changes: usize) -> Self {
        self.history_limit = changes;
        self
    }

    pub async fn start(self) -> FakeApiServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port for the fake API server");
        let address = listener
            .local_addr()
            .expect("the fake API server's address");
        let shared = Arc::new(Shared {
            resources: Mutex::new(self.resources),
            store: Mutex::new(Store::new(self.history_limit)),
            control: Mutex::new(Control::default()),
            signal: tokio::sync::watch::channel(0).0,
            shutdown: tokio::sync::watch::channel(false).0,
            open_watches: AtomicUsize::new(0),
            bookmark_interval: self.bookmark_interval,
            address,
        });
        let accept = tokio::spawn(accept_loop(listener, shared.clone()));
        let dir = tempfile::tempdir().expect("a temporary directory for the kubeconfig");
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, kubeconfig_text(address))
            .expect("write the fake API server's kubeconfig");
        FakeApiServer {
            shared,
            kubeconfig,
            _dir: dir,
            accept,
        }
    }
}

/// A running fake API server; dropping it stops the server and every open connection.
pub struct FakeApiServer {
    shared: Arc<Shared>,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
    accept: JoinHandle<()>,
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.shared.shutdown.send_replace(true);
        self.accept.abort();
    }
}

impl FakeApiServer {
    pub fn builder() -> FakeApiServerBuilder {
        FakeApiServerBuilder {
            resources: ResourceDef::defaults(),
            bookmark_interval: Duration::from_secs(1),
            history_limit: 10_000,
        }
    }

    pub async fn start() -> FakeApiServer {
        Self::builder().start().await
    }

    /// Replaces the definitions of the kinds the CRDs in `file` define, as `kubectl apply` of other CRDs would:
    /// discovery, the status subresource and validation follow at once; stored objects stay as they are.
    pub fn install_crds(&self, file: &Path) {
        let mut resources = self.shared.lock_resources();
        for resource in crd::load(file) {
            define(&mut resources, resource);
        }
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://{}", self.shared.address)
    }

    /// A kubeconfig whose current context points at this server (namespace `default`, a dummy bearer token).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// A real kube client, configured from the kubeconfig file as canaryd configures its own.
    pub async fn client(&self) -> kube::Client {
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig)
            .expect("read the fake's kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .expect("a kube config from the fake's kubeconfig");
        kube::Client::try_from(config).expect("a kube client for the fake API server")
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock_control().requests.clone()
    }

    pub fn request_count(&self, pattern: &RequestPattern) -> usize {
        self.shared
            .lock_control()
            .requests
            .iter()
            .filter(|r| pattern.matches(r))
            .count()
    }

    /// The latest resourceVersion handed out.
    pub fn resource_version(&self) -> u64 {
        self.shared.lock_store().rv
    }

    /// Watch streams currently open (a client that is watching has at least one).
    pub fn open_watches(&self) -> usize {
        self.shared.open_watches.load(Ordering::SeqCst)
    }

    /// The next `times` requests matching `pattern` fail with `status` and a kube `Status` body.
    pub fn fail_next(&self, pattern: RequestPattern, times: usize, status: u16) {
        let fault = Fault {
            pattern,
            remaining: times,
            action: FaultAction::Status(status),
        };
        self.shared.lock_control().faults.push(fault);
    }

    /// The next `times` requests matching `pattern` are answered only after `delay`.
    pub fn delay_next(&self, pattern: RequestPattern, times: usize, delay: Duration) {
        let fault = Fault {
            pattern,
            remaining: times,
            action: FaultAction::Delay(delay),
        };
        self.shared.lock_control().faults.push(fault);
    }

    /// Cut every open watch connection mid-stream, as a restarting API server or a broken proxy would.
    pub fn drop_watches(&self) {
        self.shared.write(|store| store.watch_epoch += 1);
    }

    /// Compact the history: a new watch from an older resourceVersion gets 410 Expired, and so does the next
    /// watch from the current one, forcing even a caught-up client to relist once. Open watches continue.
    pub fn expire_history(&self) {
        self.shared.write(Store::expire_history);
    }

    /// The next update or patch of this object fails with 409 Conflict.
    pub fn conflict_next_write<K: kube::Resource<DynamicType = ()>>(
        &self,
        namespace: &str,
        name: &str,
    ) {
        let key = self.key::<K>(namespace, name);
        self.shared.write(|store| store.conflict_next_write(key));
    }

    /// The stored object, read without HTTP.
    pub fn get<K: kube::Resource<DynamicType = ()> + DeserializeOwned>(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<K> {
        let value = self.get_json::<K>(namespace, name)?;
        Some(serde_json::from_value(value).expect("a stored object that deserializes as its kind"))
    }

    /// The stored object as JSON, exactly as the server would send it.
    pub fn get_json<K: kube::Resource<DynamicType = ()>>(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<Value> {
        let key = self.key::<K>(namespace, name);
        self.shared.lock_store().get(&key).map(|o| Value::clone(o))
    }

    /// Store `object` (status included) as if another client had written it; returns what was stored.
    pub fn put<K>(&self, object: &K) -> K
    where
        K: kube::Resource<DynamicType = ()> + Serialize + DeserializeOwned,
    {
        let resource = self.shared.resource_of::<K>();
        let value = serde_json::to_value(object).expect("an object that serializes");
        let stored = self
            .shared
            .write(|store| store.put_direct(&resource, value));
        let stored =
            stored.unwrap_or_else(|e| panic!("the fake API server refused put: {}", e.message));
        K::deserialize(&**stored).expect("a stored object that deserializes as its kind")
    }

    fn key<K: kube::Resource<DynamicType = ()>>(&self, namespace: &str, name: &str) -> store::Key {
        let resource = self.shared.resource_of::<K>();
        let namespace = if resource.namespaced { namespace } else { "" };
        (resource.id(), namespace.to_owned(), name.to_owned())
    }
}

fn kubeconfig_text(address: SocketAddr) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: http://{address}
contexts:
- name: fake
  context:
    cluster: fake
    user: fake
    namespace: default
current-context: fake
users:
- name: fake
  user:
    token: fake-token
"
    )
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let shared = shared.clone();
        let mut shutdown = shared.shutdown.subscribe();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(handle(shared, request).await) }
            });
            let connection = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = connection => {}
                _ = shutdown.changed() => {}
            }
        });
    }
}

async fn handle(shared: Arc<Shared>, request: Request<Incoming>) -> Response<Body> {
    let recorded = RecordedRequest {
        method: request.method().to_string(),
        path: request.uri().path().to_owned(),
        query: request.uri().query().unwrap_or_default().to_owned(),
        at: jiff::Timestamp::now(),
    };
    let fault = {
        let mut control = shared.lock_control();
        control.requests.push(recorded.clone());
        let hit = control
            .faults
            .iter_mut()
            .find(|f| f.remaining > 0 && f.pattern.matches(&recorded));
        hit.map(|fault| {
            fault.remaining -= 1;
            fault.action.clone()
        })
    };
    match fault {
        Some(FaultAction::Status(code)) => return injected_failure(code),
        Some(FaultAction::Delay(delay)) => tokio::time::sleep(delay).await,
        None => {}
    }
    let content_type = request
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or_default().trim().to_owned())
        .unwrap_or_default();
    let method = request.method().clone();
    let body = match request.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            return failure(&ApiError::bad_request(format!(
                "reading the request body: {e}"
            )));
        }
    };
    let query: HashMap<String, String> = url::form_urlencoded::parse(recorded.query.as_bytes())
        .into_owned()
        .collect();
    let call = Call {
        method,
        path: &recorded.path,
        query,
        content_type,
        body,
    };
    route(&shared, call).unwrap_or_else(|e| failure(&e))
}

struct Call<'a> {
    method: Method,
    path: &'a str,
    query: HashMap<String, String>,
    content_type: String,
    body: Bytes,
}

impl Call<'_> {
    fn param(&self, name: &str) -> Option<&str> {
        self.query
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    fn json_body(&self) -> Result<Value, ApiError> {
        serde_json::from_slice(&self.body)
            .map_err(|e| ApiError::bad_request(format!("the request body is not JSON: {e}")))
    }
}

fn route(shared: &Arc<Shared>, call: Call<'_>) -> Result<Response<Body>, ApiError> {
    let segments: Vec<&str> = call.path.split('/').filter(|s| !s.is_empty()).collect();
    let not_found = || {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    };
    if call.method != Method::GET
        && matches!(
            segments.as_slice(),
            ["version"] | ["api"] | ["apis"] | ["api", _] | ["apis", _, _]
        )
    {
        return Err(ApiError::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        ));
    }
    match segments.as_slice() {
        ["version"] => Ok(ok(StatusCode::OK, &version())),
        ["api"] => Ok(ok(
            StatusCode::OK,
            &json!({
                "kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    { "clientCIDR": "0.0.0.0/0", "serverAddress": shared.address.to_string() },
                ],
            }),
        )),
        ["apis"] => Ok(ok(StatusCode::OK, &group_list(&shared.lock_resources()))),
        ["api", version] => {
            resource_list(&shared.lock_resources(), "", version).ok_or_else(not_found)
        }
        ["apis", group, version] => {
            resource_list(&shared.lock_resources(), group, version).ok_or_else(not_found)
        }
        ["api", version, rest @ ..] => serve_resource(shared, &call, "", version, rest),
        ["apis", group, version, rest @ ..] => serve_resource(shared, &call, group, version, rest),
        _ => Err(not_found()),
    }
}

fn serve_resource(
    shared: &Arc<Shared>,
    call: &Call<'_>,
    group: &str,
    version: &str,
    rest: &[&str],
) -> Result<Response<Body>, ApiError> {
    let not_found = || {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    };
    let (namespace, rest) = match rest {
        ["namespaces", namespace, rest @ ..] if !rest.is_empty() => (Some(*namespace), rest),
        _ => (None, rest),
    };
    let (plural, name, subresource) = match rest {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(*name), None),
        [plural, name, sub] => (*plural, Some(*name), Some(*sub)),
        _ => return Err(not_found()),
    };
    let resource = shared
        .resource(group, version, plural)
        .ok_or_else(not_found)?;
    if resource.namespaced != namespace.is_some() && (name.is_some() || !resource.namespaced) {
        return Err(not_found());
    }
    let target = match subresource {
        None => Target::Main,
        Some("status") if resource.status_subresource => Target::Status,
        Some(_) => return Err(not_found()),
    };
    let namespace_text = namespace.unwrap_or_default().to_owned();
    let Some(name) = name else {
        return match call.method {
            Method::GET if matches!(call.param("watch"), Some("true" | "1")) => {
                watch(shared, call, resource, namespace)
            }
            Method::GET => list(shared, call, &resource, namespace),
            Method::POST if namespace.is_some() || !resource.namespaced => {
                let object = shared
                    .write(|store| store.create(&resource, &namespace_text, call.json_body()?))?;
                Ok(stored(StatusCode::CREATED, &object))
            }
            _ => Err(ApiError::new(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            )),
        };
    };
    let key = (resource.id(), namespace_text, name.to_owned());
    match call.method {
        Method::GET => {
            let object = shared.lock_store().get(&key).cloned();
            object
                .map(|o| stored(StatusCode::OK, &o))
                .ok_or_else(|| ApiError::not_found(&resource, name))
        }
        Method::PUT => {
            let body = call.json_body()?;
            let (object, created) =
                shared.write(|store| store.replace(&resource, &key, target, body))?;
            Ok(stored(
                if created {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                },
                &object,
            ))
        }
        Method::PATCH => {
            let kind = match call.content_type.as_str() {
                "application/merge-patch+json" => PatchKind::Merge,
                "application/json-patch+json" => PatchKind::Json,
                "application/strategic-merge-patch+json" => PatchKind::Strategic,
                "application/apply-patch+yaml" => PatchKind::Apply,
                other => {
                    let message = format!(
                        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got {other:?})"
                    );
                    return Err(ApiError::new(415, "UnsupportedMediaType", message));
                }
            };
            if kind == PatchKind::Apply && call.param("fieldManager").is_none() {
                return Err(ApiError::bad_request(
                    "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
                ));
            }
            let patch = call.json_body()?;
            let (object, created) =
                shared.write(|store| store.patch(&resource, &key, target, kind, patch))?;
            Ok(stored(
                if created {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                },
                &object,
            ))
        }
        Method::DELETE if target == Target::Main => {
            let options = if call.body.is_empty() {
                json!({})
            } else {
                call.json_body()?
            };
            let preconditions = options.get("preconditions").cloned().unwrap_or(json!({}));
            match shared.write(|store| store.delete(&resource, &key, &preconditions))? {
                Deletion::Pending(object) => Ok(stored(StatusCode::OK, &object)),
                // kube-apiserver's custom resource storage returns the deleted object; most built-in
                // kinds (Secrets, ConfigMaps, Events, Leases) return a Success Status instead.
                Deletion::Gone(object) if resource.custom => Ok(stored(StatusCode::OK, &object)),
                Deletion::Gone(object) => Ok(ok(
                    StatusCode::OK,
                    &json!({
                        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                        "details": { "name": name, "group": resource.group, "kind": resource.plural,
                                     "uid": object.pointer("/metadata/uid") },
                    }),
                )),
            }
        }
        _ => Err(ApiError::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )),
    }
}

fn selectors(call: &Call<'_>) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let labels = LabelSelector::parse(call.param("labelSelector").unwrap_or_default())
        .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?;
    let fields = FieldSelector::parse(call.param("fieldSelector").unwrap_or_default())
        .map_err(ApiError::bad_request)?;
    Ok((labels, fields))
}

fn list(
    shared: &Arc<Shared>,
    call: &Call<'_>,
    resource: &ResourceDef,
    namespace: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let (labels, fields) = selectors(call)?;
    let store = shared.lock_store();
    let id = resource.id();
    let items: Vec<&Value> = store
        .list(&id, namespace)
        .filter(|o| labels.matches(o) && fields.matches(o))
        .map(|o| &**o)
        .collect();
    let list = json!({
        "apiVersion": resource.api_version(), "kind": format!("{}List", resource.kind),
        "metadata": { "resourceVersion": store.rv.to_string() }, "items": items,
    });
    Ok(ok(StatusCode::OK, &list))
}

fn watch(
    shared: &Arc<Shared>,
    call: &Call<'_>,
    resource: ResourceDef,
    namespace: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let (labels, fields) = selectors(call)?;
    let from = match call.param("resourceVersion") {
        None | Some("0") => None,
        Some(rv) => Some(
            rv.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version {rv:?}")))?,
        ),
    };
    let timeout = match call.param("timeoutSeconds") {
        None => None,
        Some(t) => Some(Duration::from_secs(t.parse().map_err(|_| {
            ApiError::bad_request(format!("invalid timeoutSeconds {t:?}"))
        })?)),
    };
    let request = watch::WatchRequest {
        resource,
        namespace: namespace.map(str::to_owned),
        labels,
        fields,
        from,
        timeout,
        bookmarks: call.param("allowWatchBookmarks") == Some("true"),
        initial_events: call.param("sendInitialEvents") == Some("true"),
    };
    let mut response = Response::new(watch::serve(shared.clone(), request));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

fn version() -> Value {
    json!({
        "major": "1", "minor": "35", "gitVersion": "v1.35.0-fake",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.25", "compiler": "gc",
        "platform": "linux/amd64",
    })
}

fn group_list(resources: &[ResourceDef]) -> Value {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for resource in resources.iter().filter(|r| !r.group.is_empty()) {
        match groups.iter_mut().find(|(g, _)| *g == resource.group) {
            Some((_, versions)) if !versions.contains(&resource.version) => {
                versions.push(resource.version)
            }
            Some(_) => {}
            None => groups.push((resource.group, vec![resource.version])),
        }
    }
    let groups: Vec<Value> = groups
        .into_iter()
        .map(|(group, versions)| {
            let versions: Vec<Value> = versions
                .iter()
                .map(|v| json!({ "groupVersion": format!("{group}/{v}"), "version": v }))
                .collect();
            json!({ "name": group, "versions": versions, "preferredVersion": versions.first() })
        })
        .collect();
    json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
}

fn resource_list(resources: &[ResourceDef], group: &str, version: &str) -> Option<Response<Body>> {
    let mut entries = Vec::new();
    for r in resources
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        entries.push(json!({
            "name": r.plural, "singularName": r.singular, "namespaced": r.namespaced, "kind": r.kind,
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
        }));
        if r.status_subresource {
            entries.push(json!({
                "name": format!("{}/status", r.plural), "singularName": "", "namespaced": r.namespaced,
                "kind": r.kind, "verbs": ["get", "patch", "update"],
            }));
        }
    }
    if entries.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    let list = json!({
        "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": entries,
    });
    Some(ok(StatusCode::OK, &list))
}

fn ok(status: StatusCode, body: &Value) -> Response<Body> {
    reply(status, Bytes::from(body.to_string()))
}

/// A stored object as the answer, in the JSON its watch events carry too.
fn stored(status: StatusCode, object: &Stored) -> Response<Body> {
    reply(status, object.json().clone())
}

fn reply(status: StatusCode, json: Bytes) -> Response<Body> {
    let mut response = Response::new(Full::new(json).map_err(|never| match never {}).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

fn failure(error: &ApiError) -> Response<Body> {
    let status = StatusCode::from_u16(error.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    ok(status, &error.status())
}

/// The Status kube-apiserver (or its front proxy) sends for a code a test injects.
fn injected_failure(code: u16) -> Response<Body> {
    let reason = match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        410 => "Expired",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    };
    let mut response = failure(&ApiError::new(
        code,
        reason,
        format!("injected by the test: {reason}"),
    ));
    if code == 429 {
        response.headers_mut().insert(
            hyper::header::RETRY_AFTER,
            hyper::header::HeaderValue::from_static("1"),
        );
    }
    response
}
