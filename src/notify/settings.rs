//! The notification configuration the daemon sends with: `argo-rollouts-notification-configmap` and
//! `argo-rollouts-notification-secret` in the daemon's namespace (and, self-service, in every namespace, as
//! Argo's `--self-service-notification-enabled` reads them), watched, and read again into a
//! [`Config`](crate::engine::notify::config::Config) per namespace on every change, so an edit applies to the
//! next Event without a restart. A key that cannot be read is logged once per change, naming it and its
//! namespace; the rest apply.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};

use serde_json::Value;
use tokio::sync::watch;
use tracing::warn;

use crate::engine::notify::config::{CONFIG_MAP, Config, ConfigError, SECRET};

/// The configurations as last read, by namespace (the daemon's always, others where their ConfigMap or Secret
/// exists); `None` until the first read.
pub type Settings = watch::Receiver<Option<Arc<BTreeMap<String, Arc<Config>>>>>;

/// Where the settings are read.
pub struct Scope {
    /// The daemon's namespace (`--notifications-namespace`).
    pub namespace: String,
    /// Also every other namespace's (`--self-service-notification-enabled`).
    pub self_service: bool,
}

/// One YAML value of a ConfigMap key (or an annotation) as JSON, read as Kubernetes reads YAML.
pub fn yaml_value(text: &str) -> Result<Value, String> {
    let (documents, error) = crate::cli::load::parse_documents(std::path::Path::new("value"), text);
    if let Some(e) = error {
        return Err(format!("not YAML: line {}: {}", e.line, e.message));
    }
    Ok(documents
        .into_iter()
        .next()
        .map_or(Value::Null, |d| d.value))
}

/// The configuration in `config_map`'s data and `secret`'s (decoded) data, with the keys that cannot be read.
pub fn read(config_map: Option<&ConfigMap>, secret: Option<&Secret>) -> (Config, Vec<ConfigError>) {
    let data = config_map.and_then(|c| c.data.clone()).unwrap_or_default();
    let mut values: BTreeMap<String, String> = secret
        .and_then(|s| s.string_data.clone())
        .unwrap_or_default();
    for (key, bytes) in secret.and_then(|s| s.data.as_ref()).into_iter().flatten() {
        values.insert(key.clone(), String::from_utf8_lossy(&bytes.0).into_owned());
    }
    Config::parse(&data, &values, &yaml_value)
}

/// Watches both objects in the `scope` and keeps the returned [`Settings`] current until the process ends.
pub fn watch(client: kube::Client, scope: Scope) -> Settings {
    let (sender, settings) = watch::channel(None);
    let (config_maps, secrets): (Api<ConfigMap>, Api<Secret>) = if scope.self_service {
        (Api::all(client.clone()), Api::all(client))
    } else {
        let namespace = scope.namespace.as_str();
        (
            Api::namespaced(client.clone(), namespace),
            Api::namespaced(client, namespace),
        )
    };
    let named = |name: &str| watcher::Config::default().fields(&format!("metadata.name={name}"));
    let (config_map_store, config_map_writer) = kube::runtime::reflector::store();
    let (secret_store, secret_writer) = kube::runtime::reflector::store();
    // Each watch event, tagged with its watch and whether it ends a (re)list.
    let config_map_changes = watcher(config_maps, named(CONFIG_MAP))
        .default_backoff()
        .reflect(config_map_writer)
        .map(|e| (0, matches!(e, Ok(watcher::Event::InitDone) | Err(_))));
    let secret_changes = watcher(secrets, named(SECRET))
        .default_backoff()
        .reflect(secret_writer)
        .map(|e| (1, matches!(e, Ok(watcher::Event::InitDone) | Err(_))));
    let mut changes = Box::pin(futures::stream::select(config_map_changes, secret_changes));
    tokio::spawn(async move {
        // Nothing is read until both watches have listed once (or failed to: then what could be read, so the
        // Events waiting for the configuration do not wait for ever), so no Event meets half a configuration.
        let mut ready = [false, false];
        while let Some((which, done)) = changes.next().await {
            if let Some(r) = ready.get_mut(which) {
                *r |= done;
            }
            if ready.contains(&false) {
                continue;
            }
            let config_maps = config_map_store.state();
            let secrets = secret_store.state();
            let namespace_of = |meta: &kube::api::ObjectMeta| meta.namespace.clone();
            let mut namespaces: BTreeSet<String> = config_maps
                .iter()
                .filter_map(|c| namespace_of(&c.metadata))
                .chain(secrets.iter().filter_map(|s| namespace_of(&s.metadata)))
                .collect();
            namespaces.insert(scope.namespace.clone());
            let in_namespace = |meta: &kube::api::ObjectMeta, namespace: &str| {
                meta.namespace.as_deref() == Some(namespace)
            };
            let mut configs = BTreeMap::new();
            for namespace in namespaces {
                let config_map = config_maps
                    .iter()
                    .find(|c| in_namespace(&c.metadata, &namespace));
                let secret = secrets
                    .iter()
                    .find(|s| in_namespace(&s.metadata, &namespace));
                let (config, errors) = read(config_map.map(|c| &**c), secret.map(|s| &**s));
                for error in errors {
                    warn!(namespace = %namespace, error = %error, "Cannot read a notification setting; the others apply");
                }
                configs.insert(namespace, Arc::new(config));
            }
            if sender.send(Some(Arc::new(configs))).is_err() {
                return;
            }
        }
    });
    settings
}
