//! The notification configuration the daemon sends with: `argo-rollouts-notification-configmap` and
//! `argo-rollouts-notification-secret` in the daemon's namespace, watched, and read again into a
//! [`Config`](crate::engine::notify::config::Config) on every change, so an edit applies to the next Event
//! without a restart. A key that cannot be read is logged once per change, naming it; the rest apply.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};

use serde_json::Value;
use tokio::sync::watch;
use tracing::warn;

use crate::engine::notify::config::{CONFIG_MAP, Config, ConfigError, SECRET};

/// The configuration as last read; `None` until the first read.
pub type Settings = watch::Receiver<Option<Arc<Config>>>;

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

/// Watches both objects in `namespace` and keeps the returned [`Settings`] current until the process ends.
pub fn watch(client: kube::Client, namespace: &str) -> Settings {
    let (sender, settings) = watch::channel(None);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let secrets: Api<Secret> = Api::namespaced(client, namespace);
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
            let config_map = config_map_store.state().into_iter().next();
            let secret = secret_store.state().into_iter().next();
            let (config, errors) = read(config_map.as_deref(), secret.as_deref());
            for error in errors {
                warn!(error = %error, "Cannot read a notification setting; the others apply");
            }
            if sender.send(Some(Arc::new(config))).is_err() {
                return;
            }
        }
    });
    settings
}
