//! A stateful fake Kubernetes API server over plain HTTP, for tests of canaryd's kube client code (no real API
//! server can run on the test machines). TEST FIXTURE ONLY: it owns storage, the REST verbs, watches, discovery
//! and fault injection, and must stay faithful to kube-apiserver's documented behaviour for what canaryd uses.
//! It must not grow product logic, and it never talks to anything but its own loopback socket.
//!
//! # Use
//!
//! ```ignore
//! use canaryd_testkit::fake_apiserver::{FakeApiServer, RequestPattern};
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
//! - `.job_controller(JobController::by_exit_code(delay))` simulates kube-controller-manager's Job controller:
//!   each Job ends Complete or Failed after `delay` (`fake_apiserver/jobs.rs`); without it Jobs never end.
//! - `kubeconfig_path()`, `client().await`.
//! - Introspection: `requests()`, `each_request(f)`, `request_count(&RequestPattern)`, `resource_version()`,
//!   `open_watches()`, `pods_starting()`, `pruned()` (the fields custom resources lost to their CRD's schema),
//!   `get::<K>(ns, name)`, `list::<K>(ns)`, `count::<K>(ns, check)`, `get_json::<K>(ns, name)`,
//!   `put::<K>(&obj)` (stores status too, bumps the resourceVersion and notifies watches, as if another client
//!   wrote it).
//! - `replica_set_controller(ready_after)`: a simulated ReplicaSet controller (each ReplicaSet's pods created,
//!   replaced and removed to follow its spec, Ready after a delay, its status counting them;
//!   `hold_unready(name or pod-template hash)` keeps a ReplicaSet's pods from being Ready);
//!   `replica_set_controller_without_pods(ready_after)` moves the status the same with pods only counted,
//!   no Pod objects stored (for a scenario no reader of pods takes part in).
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
//! namespace, generation (custom resources and apps/v1 kinds; bumped on changes outside metadata and status).
//! Built-in workloads are defaulted as kube-apiserver defaults them (`fake_apiserver/object.rs` `normalize`):
//! the pod templates of ReplicaSets and Jobs and Pods (`canaryd::engine::pod_defaults`), ReplicaSets' and Jobs'
//! own fields; custom resources, a Rollout's template included, never are.
//!
//! # Documented simplifications
//!
//! - Strategic merge patch is applied as a JSON merge patch: lists are replaced, never merged by key. Custom
//!   resources refuse it with 415, as kube-apiserver does.
//! - Server-side apply is a JSON merge patch of the sent fields (JSON bodies only, `fieldManager` required as
//!   the real server requires it); no managedFields, no ownership conflicts, fields left out are not removed.
//! - `limit`/`continue` are ignored (one page holds everything, which the API allows); list `resourceVersion`
//!   and `resourceVersionMatch` parameters are ignored (lists are always current).
//! - core/v1 Events and events.k8s.io/v1 Events are stored separately; built-in kinds are not validated; no
//!   admission webhooks or plugins (no service account token volume, priority or default tolerations on Pods),
//!   no defaulting from CRD schemas, quantities not canonicalised, no `scale` subresource.
//! - ReplicaSets (apps/v1), Services and Pods (core/v1) are served with their status subresource and
//!   `metadata.generation` (ReplicaSets); only the simulated ReplicaSet controller makes pods and moves a
//!   ReplicaSet's status, and only when a test starts it. Pods are deleted at once (no grace period, no
//!   kubelet); `pods/NAME/eviction` deletes the pod as no PodDisruptionBudget exists.

#![allow(clippy::disallowed_methods)] // Not the Clock: the fake API server keeps real time, as a real one does.

mod crd;
mod error;
mod jobs;
mod object;
mod replicasets;
mod requests;
mod resources;
mod routes;
pub mod schema;
mod selector;
mod store;
mod watch;

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use crd::CrdSet;
use error::ApiError;
pub use jobs::JobController;
pub use object::merge_patch;
pub use replicasets::ReplicaSetController;
use requests::{Control, Fault, FaultAction};
pub use requests::{RecordedRequest, RequestPattern};
pub use resources::ResourceDef;
use resources::define;
use routes::{Call, failure, injected_failure, route};
use store::Store;
pub use store::Stored;

type Body = BoxBody<Bytes, io::Error>;

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
    /// Pods the simulated ReplicaSet controller is making Ready.
    pods_starting: AtomicUsize,
    bookmark_interval: Duration,
    request_bodies: bool,
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
    job_controller: Option<JobController>,
    request_bodies: bool,
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

    /// Whether the recorded requests keep their bodies (the default); a bench of thousands of objects that only
    /// counts requests leaves them out.
    pub fn request_bodies(mut self, keep: bool) -> Self {
        self.request_bodies = keep;
        self
    }

    /// Runs Jobs as `controller` says (kube-controller-manager's part); without one, Jobs never end.
    pub fn job_controller(mut self, controller: JobController) -> Self {
        self.job_controller = Some(controller);
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
            pods_starting: AtomicUsize::new(0),
            bookmark_interval: self.bookmark_interval,
            request_bodies: self.request_bodies,
            address,
        });
        let accept = tokio::spawn(accept_loop(listener, shared.clone()));
        if let Some(controller) = self.job_controller {
            tokio::spawn(jobs::run(shared.clone(), controller));
        }
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
            job_controller: None,
            request_bodies: true,
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

    /// Calls `each` with every request received so far, in order, without copying them (a bench's millions).
    pub fn each_request(&self, mut each: impl FnMut(&RecordedRequest)) {
        self.shared
            .lock_control()
            .requests
            .iter()
            .for_each(&mut each);
    }

    pub fn request_count(&self, pattern: &RequestPattern) -> usize {
        self.shared
            .lock_control()
            .requests
            .iter()
            .filter(|r| pattern.matches(r))
            .count()
    }

    /// Every field of a custom resource the server pruned because its CRD does not declare it, as
    /// `Kind/name: path`, in the order of the writes. kube-apiserver drops such fields silently.
    pub fn pruned(&self) -> Vec<String> {
        self.shared.lock_store().pruned.clone()
    }

    /// The latest resourceVersion handed out.
    pub fn resource_version(&self) -> u64 {
        self.shared.lock_store().rv
    }

    /// Watch streams currently open (a client that is watching has at least one).
    pub fn open_watches(&self) -> usize {
        self.shared.open_watches.load(Ordering::SeqCst)
    }

    /// Pods the simulated ReplicaSet controller will make Ready once their `ready_after` has passed: work
    /// still to come on real time.
    pub fn pods_starting(&self) -> usize {
        self.shared.pods_starting.load(Ordering::SeqCst)
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

    /// Starts the simulated ReplicaSet controller (`fake_apiserver/replicasets.rs`): ReplicaSets' pods follow
    /// their spec, each becoming Ready `ready_after` after it was created, and their status counts them. Stops
    /// when the handle is dropped.
    pub fn replica_set_controller(&self, ready_after: Duration) -> ReplicaSetController {
        ReplicaSetController::start(self.shared.clone(), ready_after, true)
    }

    /// `replica_set_controller` whose pods are only counted, never stored: the ReplicaSets' status moves the
    /// same, but there is no Pod to list, watch, evict or delete. For a scenario in which no client reads pods
    /// (the rollouts bench, whose 20,000 Pod objects would otherwise be most of the fake's work).
    pub fn replica_set_controller_without_pods(
        &self,
        ready_after: Duration,
    ) -> ReplicaSetController {
        ReplicaSetController::start(self.shared.clone(), ready_after, false)
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

    /// Every stored object of kind `K` in `namespace`, in name order, read without HTTP.
    pub fn list<K: kube::Resource<DynamicType = ()> + DeserializeOwned>(
        &self,
        namespace: &str,
    ) -> Vec<K> {
        self.snapshot::<K>(namespace)
            .iter()
            .map(|o| K::deserialize(&***o).expect("a stored object that deserializes as its kind"))
            .collect()
    }

    /// How many stored objects of kind `K` in `namespace` satisfy `check` (given each as JSON): what a bench
    /// polls, without copying thousands of objects into their types.
    pub fn count<K: kube::Resource<DynamicType = ()>>(
        &self,
        namespace: &str,
        check: impl Fn(&Value) -> bool,
    ) -> usize {
        self.snapshot::<K>(namespace)
            .iter()
            .filter(|o| check(o))
            .count()
    }

    /// The stored objects of kind `K` in `namespace`, shared: taken under the store lock, read after it.
    fn snapshot<K: kube::Resource<DynamicType = ()>>(
        &self,
        namespace: &str,
    ) -> Vec<Arc<store::Stored>> {
        let resource = self.shared.resource_of::<K>();
        let store = self.shared.lock_store();
        store
            .list(&resource.id(), Some(namespace))
            .cloned()
            .collect()
    }

    /// Calls `each` with every version of a `K` object committed after resourceVersion `after` that is still in
    /// the change history (see `history_limit`), oldest first, with when it was committed; deletions are left
    /// out. Returns the resourceVersion the history starts after: one above `after` means versions were lost.
    pub fn versions_after<K: kube::Resource<DynamicType = ()>>(
        &self,
        after: u64,
        mut each: impl FnMut(jiff::Timestamp, &Arc<Stored>),
    ) -> u64 {
        let resource = self.shared.resource_of::<K>();
        let store = self.shared.lock_store();
        for change in store.changes_after(after) {
            if change.key.0 == resource.id() && change.kind != store::ChangeKind::Deleted {
                each(change.at, &change.object.whole());
            }
        }
        store.compacted_rv
    }

    /// Calls `each` with every version of a `K` object committed from now on (deletions left out), when it is
    /// committed, under the store's lock (so it must be quick), with when it was committed: what a bench reads
    /// of thousands of objects' versions without keeping them all in the change history.
    pub fn on_commit<K: kube::Resource<DynamicType = ()>>(
        &self,
        each: impl FnMut(jiff::Timestamp, &Arc<Stored>) + Send + 'static,
    ) {
        let resource = self.shared.resource_of::<K>();
        self.shared.lock_store().tap(resource.id(), Box::new(each));
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
    let content_type = request
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or_default().trim().to_owned())
        .unwrap_or_default();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let query = request.uri().query().unwrap_or_default().to_owned();
    let body = match request.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            return failure(&ApiError::bad_request(format!(
                "reading the request body: {e}"
            )));
        }
    };
    let recorded = RecordedRequest {
        method: method.to_string(),
        path,
        query,
        content_type: content_type.clone(),
        body: if shared.request_bodies {
            String::from_utf8_lossy(&body).into_owned()
        } else {
            String::new()
        },
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
