//! The daemon's notifications: Argo Rollouts' notification configuration, unchanged, sent when canaryd
//! records an Event. The Event publisher hands this module each Event it created ([`Notifier::hook`]); the
//! Event's reason names a trigger, the subscribers of the object the Event is about to that trigger are found
//! (from the daemon's watch cache when it holds the object: one with none is not read afresh) and sent each of
//! the trigger's templates whose `when` holds, through the configured services, the object read afresh. The
//! rules are `engine::notify`'s; this module reads ([`settings`]) and sends ([`services`]).
//!
//! Once per occurrence: notifications follow the Events, which are created once; what has been sent for an
//! Event is recorded on the Event itself, in the annotation `notified.notifications.argoproj.io` (the key the
//! notifications engine records sends under), one entry per trigger, service and recipient, written after each
//! send. A new leader reads it ([`Notifier::recover`]) and sends only what an Event of the last
//! [`RECOVERY_WINDOW`] has not recorded, so a daemon killed between recording an Event and notifying sends
//! after the restart, and a sent notification is not sent again (but for one killed between a send and its
//! record). A broken template, trigger or service is a Warning Event on the object and a log line; it never
//! holds a reconcile, which has returned before the Event is created.

mod email;
pub mod services;
pub mod settings;
mod slack;
mod webhook;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::events::Reporter;
use serde_json::{Value, json};
use tracing::{info, warn};

use crate::engine::notify::config::Config;
use crate::engine::notify::render::{Vars, render};
use crate::engine::notify::subscriptions::{Destination, destinations};
use crate::engine::notify::{
    analysis_run_selector, analysis_runs_of, templates_to_send, trigger_for_reason,
};
use crate::k8s::events::{self, EventQueue, Happened};
use crate::observe::Metrics;
use crate::time::Clock;
use settings::{Scope, Settings, yaml_value};

/// The annotation on an Event that records what was sent for it.
pub const NOTIFIED: &str = "notified.notifications.argoproj.io";

/// The reason of the Warning Event a notification that cannot be sent is told with. Never itself notified.
pub const FAILED: &str = "NotificationFailed";

/// How far back a new leader looks for Events not yet notified.
pub const RECOVERY_WINDOW: Duration = Duration::from_secs(600);

/// Sends the notifications of the Events the daemon creates.
pub struct Notifier {
    client: kube::Client,
    /// The daemon's namespace, whose configuration applies to every Event.
    namespace: String,
    settings: Settings,
    http: reqwest::Client,
    events: EventQueue,
    reporter: Reporter,
    clock: Arc<Clock>,
    metrics: Arc<Metrics>,
    /// The namespaces the daemon watches (empty: all), where a new leader looks for Events to catch up on.
    watched: Vec<String>,
    /// The Events being notified now, so a catch-up and the publisher's hook never send one Event's at once.
    active: Mutex<BTreeSet<String>>,
    /// The labels and annotations of an object the daemon holds in a watch cache ([`Notifier::know`]).
    known: OnceLock<Known>,
}

/// The labels and annotations of the object an Event is about, when the daemon holds it (its Rollouts and
/// AnalysisRuns).
pub type Known = Arc<dyn Fn(&ObjectReference) -> Option<Labelled> + Send + Sync>;

/// An object's labels and annotations.
pub type Labelled = (BTreeMap<String, String>, BTreeMap<String, String>);

/// One Event being notified and the object it is about, read afresh.
struct Occurrence<'a> {
    event: &'a Event,
    reason: &'a str,
    trigger: String,
    regarding: ObjectReference,
    object: Value,
}

/// The Event publisher's hook: each Event created that could fire something is notified in a task of its own.
struct Hook(Arc<Notifier>);

impl events::Listener for Hook {
    fn listening(&self) -> bool {
        listening(self.0.settings.borrow().as_deref())
    }

    fn created(&self, event: &Event) {
        let notifier = self.0.clone();
        let event = event.clone();
        tokio::spawn(async move { notifier.notify(event).await });
    }
}

/// Whether an Event could fire anything under `settings` (each namespace's configuration): until they are read,
/// yes (the Event waits for them); once read, only if some configuration has a trigger. A daemon started with
/// `--notifications-namespace` and no notification configuration notifies nothing.
fn listening(settings: Option<&BTreeMap<String, Arc<Config>>>) -> bool {
    settings.is_none_or(|configs| configs.values().any(|c| !c.triggers.is_empty()))
}

/// Whether an object with `labels` and `annotations` has, under any of `configs`, a subscriber to `trigger` or a
/// subscription that cannot be read (told as a Warning): if neither, its Event sends nothing.
fn subscribed(
    configs: &[(String, Arc<Config>)],
    trigger: &str,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> bool {
    configs.iter().any(|(_, config)| {
        let (found, problems) = destinations(config, trigger, labels, annotations, &yaml_value);
        !found.is_empty() || !problems.is_empty()
    })
}

/// Holds an Event's place in [`Notifier::active`] until dropped.
struct Active<'a>(&'a Mutex<BTreeSet<String>>, String);

impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.1);
    }
}

impl Notifier {
    /// A notifier reading its configuration in `scope`, telling failures through `events`, catching up on the
    /// Events of the `watched` namespaces (empty: all).
    pub fn new(
        client: kube::Client,
        scope: Scope,
        watched: Vec<String>,
        events: EventQueue,
        reporter: Reporter,
        clock: Arc<Clock>,
        metrics: Arc<Metrics>,
    ) -> Arc<Notifier> {
        Arc::new(Notifier {
            namespace: scope.namespace.clone(),
            settings: settings::watch(client.clone(), scope),
            client,
            http: services::http_client(),
            events,
            reporter,
            clock,
            metrics,
            watched,
            active: Mutex::default(),
            known: OnceLock::new(),
        })
    }

    /// Tells the notifier where the daemon holds objects' labels and annotations (set once: its watch caches).
    pub fn know(&self, known: Known) {
        let _ = self.known.set(known);
    }

    /// What the Event publisher tells of each Event it created: see [`Hook`].
    pub fn hook(self: &Arc<Self>) -> events::Created {
        Arc::new(Hook(self.clone()))
    }

    /// The configurations an Event about an object in `namespace` is notified with, once read: the daemon's,
    /// then (self-service) the namespace's own, each with the prefix of its keys in [`NOTIFIED`].
    async fn configs(&self, namespace: &str) -> Vec<(String, Arc<Config>)> {
        let mut settings = self.settings.clone();
        let Some(by_namespace) = settings
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|read| read.clone())
        else {
            return Vec::new();
        };
        let own = (namespace != self.namespace)
            .then(|| by_namespace.get(namespace))
            .flatten()
            .map(|config| (format!("{namespace}/"), config.clone()));
        let daemon = by_namespace
            .get(&self.namespace)
            .map(|config| (String::new(), config.clone()));
        daemon.into_iter().chain(own).collect()
    }

    /// Sends what `event` fires and it has not recorded as sent.
    pub async fn notify(&self, event: Event) {
        let Some(reason) = event.reason.as_deref().filter(|r| *r != FAILED) else {
            return;
        };
        let name = event.metadata.name.clone().unwrap_or_default();
        if !self
            .active
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.clone())
        {
            return;
        }
        let _active = Active(&self.active, name);
        let trigger = trigger_for_reason(reason);
        let Some(regarding) = event.regarding.clone() else {
            return;
        };
        let mut configs = self
            .configs(regarding.namespace.as_deref().unwrap_or_default())
            .await;
        configs.retain(|(_, config)| config.triggers.contains_key(&trigger));
        if configs.is_empty() {
            return;
        }
        // An object the daemon holds and that nothing subscribes to for this trigger is not read afresh: with
        // Argo's built-in triggers configured, that was a GET for most Events of every Rollout (Argo's recorder
        // looks at the object it holds). One that is subscribed is read, so what is sent shows it as it is now.
        let held = self.known.get().and_then(|known| known(&regarding));
        if held.is_some_and(|(labels, annotations)| {
            !subscribed(&configs, &trigger, &labels, &annotations)
        }) {
            return;
        }
        let object = match read(&self.client, &regarding).await {
            Ok(object) => object,
            Err(e) => {
                warn!(trigger = %trigger, error = %e, "Cannot read the object to notify about");
                return;
            }
        };
        let occurrence = Occurrence {
            event: &event,
            reason,
            trigger,
            regarding,
            object,
        };
        let mut notified = recorded(&event);
        let mut runs = None;
        for (prefix, config) in configs {
            self.notify_with(&occurrence, &config, &prefix, &mut runs, &mut notified)
                .await;
        }
    }

    /// Sends what `occurrence` fires under `config` and `notified` has not recorded, recording each send
    /// under `prefix`; the Rollout's AnalysisRuns are listed once, when a trigger first needs them.
    async fn notify_with(
        &self,
        occurrence: &Occurrence<'_>,
        config: &Config,
        prefix: &str,
        runs: &mut Option<Value>,
        notified: &mut serde_json::Map<String, Value>,
    ) {
        let Occurrence {
            event,
            reason,
            trigger,
            regarding,
            object,
        } = occurrence;
        let metadata = |key: &str| -> BTreeMap<String, String> {
            serde_json::from_value(object["metadata"][key].clone()).unwrap_or_default()
        };
        let (subscribed, problems) = destinations(
            config,
            trigger,
            &metadata("labels"),
            &metadata("annotations"),
            &yaml_value,
        );
        for problem in problems {
            self.failed(config, regarding, trigger, reason, problem);
        }
        if subscribed.is_empty() {
            return;
        }
        let runs = match runs {
            Some(listed) => listed,
            None => runs.insert(analysis_runs(&self.client, regarding, object).await),
        };
        let now = self.clock.now();
        let sends = match templates_to_send(config, trigger, object, runs, now) {
            Ok(sends) => sends,
            Err(e) => return self.failed(config, regarding, trigger, reason, e),
        };
        for destination in subscribed {
            let key = format!(
                "{prefix}{trigger}:{}:{}",
                destination.service, destination.recipient
            );
            if notified.contains_key(&key) || sends.is_empty() {
                continue;
            }
            let mut outcome = "sent";
            for templates in &sends {
                let sent = deliver(&self.http, config, object, runs, &destination, templates).await;
                let ok = sent.is_ok();
                self.metrics.notification_sent(
                    ok,
                    regarding.namespace.as_deref().unwrap_or_default(),
                    regarding.name.as_deref().unwrap_or_default(),
                    event.type_.as_deref().unwrap_or("Normal"),
                    reason,
                );
                if let Err(e) = sent {
                    outcome = "failed";
                    self.failed(config, regarding, trigger, reason, e);
                } else {
                    info!(trigger = %trigger, service = %destination.service, recipient = %destination.recipient, "Notification sent");
                }
            }
            notified.insert(key, json!(outcome));
            self.record(event, notified).await;
        }
    }

    /// Records on `event` what has been sent for it.
    async fn record(&self, event: &Event, notified: &serde_json::Map<String, Value>) {
        let (Some(name), Some(namespace)) = (
            event.metadata.name.as_deref(),
            event.metadata.namespace.as_deref(),
        ) else {
            return;
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        let text = Value::Object(notified.clone()).to_string();
        let patch = json!({"metadata": {"annotations": {NOTIFIED: text}}});
        if let Err(e) = api
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            warn!(event = %name, error = %e, "Cannot record the notifications sent for an Event");
        }
    }

    /// Tells a notification that cannot be sent: a log line and a Warning Event on the object, secrets hidden.
    fn failed(
        &self,
        config: &Config,
        regarding: &ObjectReference,
        trigger: &str,
        reason: &str,
        error: String,
    ) {
        let error = crate::engine::scrub::text(error, &config.secrets.0);
        warn!(trigger = %trigger, event_reason = %reason, error = %error, "Notification failed");
        let what = Happened {
            action: "Notify",
            reason: FAILED,
            note: format!("Notification for trigger '{trigger}' failed: {error}"),
            warning: true,
        };
        let now = self.clock.now();
        self.events.push([events::about(
            &self.reporter,
            regarding.clone(),
            what,
            now,
            0,
        )]);
    }

    /// Notifies what the Events canaryd created in the last [`RECOVERY_WINDOW`] fire and have not recorded as
    /// sent: a new leader's catch-up after a restart or a failover.
    pub async fn recover(&self) {
        let apis: Vec<Api<Event>> = if self.watched.is_empty() {
            vec![Api::all(self.client.clone())]
        } else {
            let namespaced = |n: &String| Api::namespaced(self.client.clone(), n);
            self.watched.iter().map(namespaced).collect()
        };
        let mut listed = Vec::new();
        for api in apis {
            match api.list(&ListParams::default()).await {
                Ok(list) => listed.extend(list.items),
                Err(e) => warn!(error = %e, "Cannot list the Events to catch up on notifications"),
            }
        }
        let now = self.clock.now();
        let since = now
            .checked_sub(jiff::SignedDuration::try_from(RECOVERY_WINDOW).unwrap_or_default())
            .unwrap_or(now);
        for event in listed {
            let ours =
                event.reporting_controller.as_deref() == Some(self.reporter.controller.as_str());
            let recent = event.event_time.as_ref().is_some_and(|t| t.0 >= since);
            if ours && recent {
                self.notify(event).await;
            }
        }
    }
}

/// What `event` records as already sent.
fn recorded(event: &Event) -> serde_json::Map<String, Value> {
    event
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(NOTIFIED))
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default()
}

/// Renders `templates` for `destination` and sends them through its service.
pub async fn deliver(
    http: &reqwest::Client,
    config: &Config,
    object: &Value,
    runs: &Value,
    destination: &Destination,
    templates: &[String],
) -> Result<(), String> {
    let Some(service) = config.services.get(&destination.service) else {
        return Err(format!(
            "notification service '{}' is not configured",
            destination.service
        ));
    };
    let notification = render_for(config, object, runs, destination, templates)?;
    services::send(http, service, &notification, destination).await
}

/// The notification `templates` make for `destination` about `object` and its AnalysisRuns `runs`.
pub fn render_for(
    config: &Config,
    object: &Value,
    runs: &Value,
    destination: &Destination,
    templates: &[String],
) -> Result<serde_json::Map<String, Value>, String> {
    let vars = Vars {
        rollout: object,
        analysis_runs: runs,
        recipient: &destination.recipient,
        service: &destination.service,
        context: &config.context,
    };
    render(&config.templates, templates, &vars)
}

/// The object `regarding` names, as JSON, read afresh.
pub async fn read(
    client: &kube::Client,
    regarding: &ObjectReference,
) -> Result<Value, kube::Error> {
    let kind = regarding.kind.as_deref().unwrap_or_default();
    let name = regarding.name.as_deref().unwrap_or_default();
    let object = api_of(client, regarding, kind).get(name).await?;
    Ok(serde_json::to_value(object).unwrap_or_default())
}

/// The objects of `kind` in the API group and namespace of `regarding`.
fn api_of(client: &kube::Client, regarding: &ObjectReference, kind: &str) -> Api<DynamicObject> {
    let api_version = regarding.api_version.as_deref().unwrap_or("v1");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, &format!("{}s", kind.to_lowercase()));
    let namespace = regarding.namespace.as_deref().unwrap_or_default();
    Api::namespaced_with(client.clone(), namespace, &resource)
}

/// `analysisRuns` for a trigger about the object `regarding` names (nil for another object than a Rollout,
/// or when they cannot be listed: logged, as record.go logs it and leaves them out).
pub async fn analysis_runs(
    client: &kube::Client,
    regarding: &ObjectReference,
    object: &Value,
) -> Value {
    if regarding.kind.as_deref() != Some("Rollout") {
        return Value::Null;
    }
    let api = api_of(client, regarding, "AnalysisRun");
    let params = ListParams::default().labels(&analysis_run_selector(object));
    match api.list(&params).await {
        Ok(list) => {
            let listed = list
                .items
                .iter()
                .filter_map(|r| serde_json::to_value(r).ok());
            analysis_runs_of(object, listed.collect())
        }
        Err(e) => {
            warn!(error = %e, "Cannot list the AnalysisRuns a notification's trigger reads");
            Value::Null
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_listened_for_until_the_settings_are_read_and_then_only_with_a_trigger() {
        assert!(listening(None));
        let mut configs = BTreeMap::new();
        assert!(!listening(Some(&configs)));
        configs.insert("canaryd".to_string(), Arc::new(Config::default()));
        assert!(!listening(Some(&configs)));
        let mut triggered = Config::default();
        triggered
            .triggers
            .insert("on-rollout-completed".to_string(), Vec::new());
        configs.insert("team".to_string(), Arc::new(triggered));
        assert!(listening(Some(&configs)));
    }

    #[test]
    fn only_an_object_subscribed_to_the_trigger_or_with_a_broken_subscription_needs_reading() {
        let mut config = Config::default();
        config
            .triggers
            .insert("on-rollout-updated".to_string(), Vec::new());
        let configs = [("".to_string(), Arc::new(config))];
        let labels = BTreeMap::new();
        let annotated =
            |key: &str, value: &str| BTreeMap::from([(key.to_string(), value.to_string())]);
        let subscribed_with = |annotations: &BTreeMap<String, String>| {
            subscribed(&configs, "on-rollout-updated", &labels, annotations)
        };
        assert!(!subscribed_with(&BTreeMap::new()));
        assert!(!subscribed_with(&annotated("app", "web")));
        assert!(!subscribed_with(&annotated(
            "notifications.argoproj.io/subscribe.on-rollout-aborted.webhook",
            "ops"
        )));
        assert!(subscribed_with(&annotated(
            "notifications.argoproj.io/subscribe.on-rollout-updated.webhook",
            "ops"
        )));
        assert!(subscribed_with(&annotated(
            "notifications.argoproj.io/subscriptions",
            "[not, a: list"
        )));
    }
}
