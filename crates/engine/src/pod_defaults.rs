//! The defaults kube-apiserver fills into a pod spec on every write (Kubernetes' `pkg/apis/core/v1/defaults.go`
//! and the Go serialization of the fields it leaves at zero), over JSON: what a ReplicaSet's, Job's or Pod's pod
//! template reads back as from a real cluster. Argo Rollouts defaults a Rollout's template the same way before
//! comparing it with a ReplicaSet's (`PodTemplateEqualIgnoreHash`), because a Rollout is a custom resource and its
//! template is never defaulted; the fake API server applies them to the built-in kinds it stores. Owns these
//! defaults only: what to compare, and when, is the caller's.

use serde_json::{Map, Value, json};

/// `SetDefaults_PodSpec` and what it reaches, on a pod template (`PodTemplateSpec`: `metadata` and `spec`).
pub fn default_template(template: &mut Value) {
    let Some(template) = template.as_object_mut() else {
        return;
    };
    // A template's metadata is Go's ObjectMeta with a zero creation time, which serializes as null.
    if let Some(metadata) = object_at(template, "metadata") {
        metadata.entry("creationTimestamp").or_insert(Value::Null);
    }
    if let Some(spec) = object_at(template, "spec") {
        default_pod_spec(spec);
    }
}

/// A Pod's defaults: its spec's as in a template, plus `SetDefaults_Pod`'s, which only Pods get
/// (`enableServiceLinks`, requests taken from limits where a container sets limits only).
pub fn default_pod(pod: &mut Value) {
    let Some(spec) = pod.as_object_mut().and_then(|pod| object_at(pod, "spec")) else {
        return;
    };
    default_pod_spec(spec);
    fill(spec, "enableServiceLinks", json!(true));
    for container in containers(spec) {
        let Some(resources) = container
            .get_mut("resources")
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        let Some(limits) = resources.get("limits").and_then(Value::as_object).cloned() else {
            continue;
        };
        let requests = resources.entry("requests").or_insert_with(|| json!({}));
        if let Some(requests) = requests.as_object_mut() {
            for (resource, quantity) in limits {
                requests.entry(resource).or_insert(quantity);
            }
        }
    }
}

fn default_pod_spec(spec: &mut Map<String, Value>) {
    fill(spec, "dnsPolicy", json!("ClusterFirst"));
    fill(spec, "restartPolicy", json!("Always"));
    fill(spec, "securityContext", json!({}));
    fill(spec, "terminationGracePeriodSeconds", json!(30));
    fill(spec, "schedulerName", json!("default-scheduler"));
    // The deprecated field mirrors the current one: kube-apiserver's conversion writes both.
    if let Some(account) = spec.get("serviceAccountName").cloned() {
        spec.entry("serviceAccount").or_insert(account);
    }
    let host_network = spec.get("hostNetwork") == Some(&json!(true));
    for container in containers(spec) {
        default_container(container, host_network);
    }
    for volume in items(spec, "volumes") {
        default_volume(volume);
    }
}

/// `SetDefaults_Container`, `SetDefaults_ContainerPort`, `SetDefaults_Probe`, `SetDefaults_HTTPGetAction`
/// and the field selectors of its environment.
fn default_container(container: &mut Map<String, Value>, host_network: bool) {
    if absent(container, "imagePullPolicy") {
        let image = container
            .get("image")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let policy = if pulls_latest(image) {
            "Always"
        } else {
            "IfNotPresent"
        };
        container.insert("imagePullPolicy".into(), json!(policy));
    }
    fill(
        container,
        "terminationMessagePath",
        json!("/dev/termination-log"),
    );
    fill(container, "terminationMessagePolicy", json!("File"));
    // A struct field, not a pointer: Go writes it even when empty.
    fill(container, "resources", json!({}));
    for port in items(container, "ports") {
        fill(port, "protocol", json!("TCP"));
        // With the host's network a container port is a host port (`defaultHostNetworkPorts`).
        if host_network && let Some(number) = port.get("containerPort").cloned() {
            port.entry("hostPort").or_insert(number);
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(probe) = object_at(container, probe) {
            default_probe(probe);
        }
    }
    for variable in items(container, "env") {
        if let Some(from) = object_at(variable, "valueFrom") {
            default_selectors(from);
        }
    }
}

fn default_probe(probe: &mut Map<String, Value>) {
    fill(probe, "timeoutSeconds", json!(1));
    fill(probe, "periodSeconds", json!(10));
    fill(probe, "successThreshold", json!(1));
    fill(probe, "failureThreshold", json!(3));
    if let Some(get) = object_at(probe, "httpGet") {
        fill(get, "path", json!("/"));
        fill(get, "scheme", json!("HTTP"));
    }
    if let Some(grpc) = object_at(probe, "grpc") {
        fill(grpc, "service", json!(""));
    }
}

/// `SetDefaults_ObjectFieldSelector`; a resource selector's divisor is a Go quantity, written as "0" when unset.
fn default_selectors(holder: &mut Map<String, Value>) {
    if let Some(field) = object_at(holder, "fieldRef") {
        fill(field, "apiVersion", json!("v1"));
    }
    if let Some(resource) = object_at(holder, "resourceFieldRef") {
        fill(resource, "divisor", json!("0"));
    }
}

/// `SetDefaults_Volume` (a volume without a source is an emptyDir) and the file modes and token lifetimes of
/// `SetDefaults_{Secret,ConfigMap,DownwardAPI,Projected}VolumeSource`, `SetDefaults_ServiceAccountTokenProjection`,
/// `SetDefaults_HostPathVolumeSource`.
fn default_volume(volume: &mut Map<String, Value>) {
    if volume.keys().all(|field| field == "name") {
        volume.insert("emptyDir".into(), json!({}));
    }
    const MODE_0644: i64 = 0o644;
    for source in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(source) = object_at(volume, source) {
            fill(source, "defaultMode", json!(MODE_0644));
        }
    }
    if let Some(host_path) = object_at(volume, "hostPath") {
        fill(host_path, "type", json!(""));
    }
    if let Some(downward) = object_at(volume, "downwardAPI") {
        for item in items(downward, "items") {
            default_selectors(item);
        }
    }
    if let Some(projected) = object_at(volume, "projected") {
        for source in items(projected, "sources") {
            if let Some(token) = object_at(source, "serviceAccountToken") {
                fill(token, "expirationSeconds", json!(3600));
            }
            if let Some(downward) = object_at(source, "downwardAPI") {
                for item in items(downward, "items") {
                    default_selectors(item);
                }
            }
        }
    }
}

/// Whether Kubernetes' `ParseImageName` reads the image's tag as `latest`: written so, or neither tag nor digest
/// given. A tag is what follows the last `:` of the last path segment (a registry's port comes before a `/`).
fn pulls_latest(image: &str) -> bool {
    if image.contains('@') {
        let name = image.split('@').next().unwrap_or_default();
        return tag(name) == Some("latest");
    }
    tag(image).is_none_or(|tag| tag == "latest")
}

fn tag(name: &str) -> Option<&str> {
    let last_segment = name.rsplit('/').next().unwrap_or(name);
    last_segment.split_once(':').map(|(_, tag)| tag)
}

/// The containers, init containers and ephemeral containers of a pod spec.
fn containers(spec: &mut Map<String, Value>) -> impl Iterator<Item = &mut Map<String, Value>> {
    spec.iter_mut()
        .filter(|(field, _)| {
            matches!(
                field.as_str(),
                "containers" | "initContainers" | "ephemeralContainers"
            )
        })
        .filter_map(|(_, list)| list.as_array_mut())
        .flatten()
        .filter_map(Value::as_object_mut)
}

fn items<'a>(
    holder: &'a mut Map<String, Value>,
    list: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    holder
        .get_mut(list)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

fn object_at<'a>(
    holder: &'a mut Map<String, Value>,
    field: &str,
) -> Option<&'a mut Map<String, Value>> {
    holder.get_mut(field).and_then(Value::as_object_mut)
}

fn absent(holder: &Map<String, Value>, field: &str) -> bool {
    holder
        .get(field)
        .is_none_or(|v| v.is_null() || v.as_str() == Some(""))
}

/// Sets `field` where the client left it out (absent, null or Go's empty string).
fn fill(holder: &mut Map<String, Value>, field: &str, value: Value) {
    if absent(holder, field) {
        holder.insert(field.into(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_reads_back_as_a_real_clusters_replica_set_template() {
        let mut template = json!({
            "metadata": {"labels": {"app": "web"}},
            "spec": {
                "serviceAccountName": "web",
                "containers": [{
                    "name": "web", "image": "registry:5000/web",
                    "ports": [{"containerPort": 8080}],
                    "readinessProbe": {"httpGet": {"port": 8080}},
                    "env": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                }],
                "volumes": [{"name": "config", "configMap": {"name": "web"}}, {"name": "scratch"}],
            }
        });
        default_template(&mut template);
        // As `kubectl get rs -o json` shows a ReplicaSet made from the template above.
        let expected = json!({
            "metadata": {"creationTimestamp": null, "labels": {"app": "web"}},
            "spec": {
                "serviceAccountName": "web", "serviceAccount": "web",
                "containers": [{
                    "name": "web", "image": "registry:5000/web", "imagePullPolicy": "Always",
                    "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                    "readinessProbe": {"httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"},
                        "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3},
                    "env": [{"name": "POD", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
                    "resources": {},
                    "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                }],
                "volumes": [{"name": "config", "configMap": {"name": "web", "defaultMode": 420}},
                            {"name": "scratch", "emptyDir": {}}],
                "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                "securityContext": {}, "terminationGracePeriodSeconds": 30,
            }
        });
        assert_eq!(template, expected);
        let again = template.clone();
        default_template(&mut template);
        assert_eq!(template, again, "defaulting twice changes nothing");
    }

    #[test]
    fn the_pull_policy_is_always_only_for_latest_or_no_tag() {
        for (image, always) in [
            ("web", true),
            ("web:latest", true),
            ("registry:5000/web", true),
            ("registry:5000/web:1.2", false),
            ("web:1", false),
            ("web@sha256:abc", false),
            ("web:latest@sha256:abc", true),
        ] {
            assert_eq!(pulls_latest(image), always, "{image}");
        }
    }

    #[test]
    fn only_a_pod_gets_service_links_and_requests_from_limits() {
        let spec = json!({"containers": [{"name": "c", "image": "c:1",
            "resources": {"limits": {"cpu": "1"}, "requests": {"memory": "1Gi"}}}]});
        let mut pod = json!({"spec": spec.clone()});
        default_pod(&mut pod);
        assert_eq!(pod["spec"]["enableServiceLinks"], json!(true));
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["requests"],
            json!({"cpu": "1", "memory": "1Gi"})
        );
        let mut template = json!({"spec": spec});
        default_template(&mut template);
        assert_eq!(template["spec"].get("enableServiceLinks"), None);
        assert_eq!(
            template["spec"]["containers"][0]["resources"]["requests"],
            json!({"memory": "1Gi"})
        );
    }

    #[test]
    fn what_the_client_wrote_is_kept() {
        let mut template = json!({"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": "c", "imagePullPolicy": "Never",
                "ports": [{"containerPort": 53, "protocol": "UDP"}]}]}});
        default_template(&mut template);
        assert_eq!(template["spec"]["restartPolicy"], json!("Never"));
        assert_eq!(template["spec"]["terminationGracePeriodSeconds"], json!(0));
        assert_eq!(
            template["spec"]["containers"][0]["imagePullPolicy"],
            json!("Never")
        );
        assert_eq!(
            template["spec"]["containers"][0]["ports"][0]["protocol"],
            json!("UDP")
        );
    }
}
