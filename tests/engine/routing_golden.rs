//! Golden cases for the traffic-router builders (`engine::routing`): each file under
//! `tests/fixtures/routing/<router>/` holds a Rollout's `trafficRouting`, the desired weight and hashes, the
//! router object as the API server returned it, and the expected result (`output`, `null` for "nothing to
//! write", or `error`; for a VirtualService also the `events` Argo records of the write, as [reason, message]
//! pairs). Most cases are Argo Rollouts' own unit-test and e2e expectations (named in each file).
//! Every object a builder outputs is admitted against its project's published CRD (`tests/fixtures/crds/`)
//! by the fake API server's schema walker (types, required fields, pruning), and every canary Ingress is
//! checked with `kubernetes-validate --strict` from the `.venv` that `tests/run.sh` installs.

use std::path::PathBuf;
use std::process::Command;

use canaryd::api::Rollout;
use canaryd::api::rollout::CanaryStep;
use canaryd::api::traffic_routing::{IstioDestinationRule, IstioVirtualService};
use canaryd::cli::load::load_file;
use canaryd::engine::routing::nginx::{self, CanaryIngress};
use canaryd::engine::routing::smi::{self, SmiApiVersion, TrafficSplitWrite};
use canaryd::engine::routing::{
    Desired, ManagedRouteChange, Moved, Routing, Target, alb, gateway, istio, managed_routes,
    routing, traefik,
};
use canaryd_testkit::fake_apiserver::schema::{self, Schema};
use k8s_openapi::api::networking::v1::Ingress;
use serde_json::{Value, json};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

struct Case {
    file: PathBuf,
    doc: Value,
}

fn cases(router: &str) -> Vec<Case> {
    let dir = root().join("tests/fixtures/routing").join(router);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no cases in {}", dir.display());
    files
        .into_iter()
        .map(|file| {
            let (docs, err) = load_file(&file);
            assert!(err.is_none(), "{err:?}");
            Case {
                doc: docs[0].value.clone(),
                file,
            }
        })
        .collect()
}

impl Case {
    fn name(&self) -> String {
        self.file
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }

    fn rollout(&self) -> Rollout {
        let mut canary = json!({"trafficRouting": self.doc["trafficRouting"]});
        for key in ["canaryService", "stableService"] {
            if let Some(v) = self.doc.get(key) {
                canary[key] = v.clone();
            }
        }
        serde_json::from_value(json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
            "metadata": {"name": "rollout", "namespace": "default", "uid": "rollout-uid"},
            "spec": {"strategy": {"canary": canary}}
        }))
        .unwrap()
    }

    fn routing(&self, rollout: &Rollout) -> Routing {
        routing(rollout)
            .unwrap_or_else(|e| panic!("{}: {e}", self.name()))
            .unwrap()
    }

    fn str(&self, key: &str) -> &str {
        self.doc.get(key).and_then(Value::as_str).unwrap_or("")
    }

    /// The case's `change`: the managed routes `remove`d and the `step` whose route is set.
    fn managed_change(&self) -> ManagedRouteChange {
        let Some(change) = self.doc.get("change") else {
            return ManagedRouteChange::default();
        };
        let remove = change.get("remove").cloned().unwrap_or(json!([]));
        let step: Option<CanaryStep> = change
            .get("step")
            .map(|s| serde_json::from_value(s.clone()).unwrap());
        ManagedRouteChange {
            remove: serde_json::from_value(remove).unwrap(),
            set: step.and_then(|s| managed_routes::step_route(&s).unwrap()),
        }
    }

    fn weight(&self) -> i32 {
        self.doc["weight"].as_i64().unwrap() as i32
    }

    /// Compares a builder's result with the case's `output` or `error`; a mismatch names the case.
    fn check(&self, got: Result<Value, String>, failures: &mut Vec<String>) {
        let expected_error = self.doc.get("error").and_then(Value::as_str);
        match (got, expected_error) {
            (Ok(v), None) if v == self.doc["output"] => {}
            (Err(e), Some(want)) if e == want => {}
            (Ok(v), _) => failures.push(format!(
                "{}: got\n{}\nexpected {}",
                self.name(),
                serde_json::to_string_pretty(&v).unwrap(),
                expected_error.map_or_else(
                    || serde_json::to_string_pretty(&self.doc["output"]).unwrap(),
                    |e| format!("the error {e:?}")
                )
            )),
            (Err(e), _) => failures.push(format!(
                "{}: error {e:?}, expected {}",
                self.name(),
                expected_error.unwrap_or("an output")
            )),
        }
    }
}

/// The `openAPIV3Schema` of `version` in the CRD `file`.
fn crd_schema(file: &str, version: &str) -> Value {
    let (docs, err) = load_file(&root().join("tests/fixtures/crds").join(file));
    assert!(err.is_none(), "{err:?}");
    let versions = docs[0].value["spec"]["versions"]
        .as_array()
        .unwrap()
        .clone();
    versions
        .into_iter()
        .find(|v| v["name"] == version)
        .unwrap_or_else(|| panic!("{file} has no version {version}"))["schema"]["openAPIV3Schema"]
        .clone()
}

/// What the API server would do to `object` on write: nothing pruned, nothing rejected.
fn admitted(file: &str, object: &Value) -> Result<(), String> {
    let version = object["apiVersion"]
        .as_str()
        .and_then(|a| a.rsplit('/').next())
        .unwrap_or("");
    let mut copy = object.clone();
    match schema::admit(&Schema::from(&crd_schema(file, version)), &mut copy, None) {
        Ok(pruned) if pruned.is_empty() => Ok(()),
        Ok(pruned) => Err(format!("the API server would prune {pruned:?}")),
        Err(e) => Err(e),
    }
}

/// The Events Argo's router records of a write of `target` that `moved` this, as [reason, message] pairs.
/// The Events Argo records for the write, checked against the case's `events` when it names them.
fn check_events(
    case: &Case,
    target: &Target,
    desired: &Desired,
    moved: Moved,
    failures: &mut Vec<String>,
) {
    let told = json!(
        target
            .written(desired, false, moved)
            .into_iter()
            .map(|e| json!([e.reason, e.message]))
            .collect::<Vec<_>>()
    );
    if let Some(want) = case.doc.get("events")
        && *want != told
    {
        failures.push(format!("{}: Events {told}, expected {want}", case.name()));
    }
}

fn finish(failures: Vec<String>) {
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_virtual_service_case_matches_argo_and_the_istio_crd() {
    let mut failures = Vec::new();
    for case in cases("istio-virtualservice") {
        let rollout = case.rollout();
        let routing = case.routing(&rollout);
        let istio_config = routing.istio.as_ref().unwrap();
        let change = case.managed_change();
        let desired = Desired::new(&rollout, &routing, case.weight(), "", "").with_managed(&change);
        let vs: &IstioVirtualService = istio::virtual_services(istio_config)[0];
        let dr: Option<&IstioDestinationRule> = istio_config.destination_rule.as_ref();
        let (namespace, name) = istio::namespace_and_name(&vs.name, "default");
        let target = Target::VirtualService {
            namespace,
            name,
            config: vs,
            destination_rule: dr,
        };
        let got = target
            .build(&case.doc["input"], &desired)
            .map_err(|e| e.to_string());
        // The check of a Rollout's references fails where the build does, with its error.
        let checked = target
            .check(&case.doc["input"], &desired)
            .map_err(|e| e.to_string());
        if checked != got.as_ref().map(drop).map_err(String::clone) {
            failures.push(format!("{}: checked {checked:?}", case.name()));
        }
        if let Ok(Some(built)) = &got {
            if let Err(e) = admitted("istio-virtualservices-crd.yaml", &built.object) {
                failures.push(format!("{}: {e}", case.name()));
            }
            check_events(&case, &target, &desired, built.moved, &mut failures);
        }
        case.check(
            got.map(|o| o.map_or(Value::Null, |b| b.object)),
            &mut failures,
        );
    }
    finish(failures);
}

#[test]
fn every_destination_rule_case_matches_argo_and_the_istio_crd() {
    let mut failures = Vec::new();
    for case in cases("istio-destinationrule") {
        let rollout = case.rollout();
        let routing = case.routing(&rollout);
        let dr = routing
            .istio
            .as_ref()
            .unwrap()
            .destination_rule
            .as_ref()
            .unwrap();
        let desired = Desired::new(
            &rollout,
            &routing,
            case.weight(),
            case.str("canaryHash"),
            case.str("stableHash"),
        );
        let got =
            istio::destination_rule(&case.doc["input"], dr, &desired).map_err(|e| e.to_string());
        if let Ok(Some(out)) = &got
            && let Err(e) = admitted("istio-destinationrules-crd.yaml", out)
        {
            failures.push(format!("{}: {e}", case.name()));
        }
        case.check(got.map(|o| o.unwrap_or(Value::Null)), &mut failures);
    }
    finish(failures);
}

#[test]
fn every_http_route_case_matches_the_gateway_api_plugin_and_the_crd() {
    let mut failures = Vec::new();
    for case in cases("gateway") {
        let rollout = case.rollout();
        let routing = case.routing(&rollout);
        let config = routing.gateway_api.as_ref().unwrap();
        let change = case.managed_change();
        let desired = Desired::new(&rollout, &routing, case.weight(), "", "").with_managed(&change);
        let got =
            gateway::http_route(&case.doc["input"], config, &desired).map_err(|e| e.to_string());
        if let Ok(Some(out)) = &got
            && let Err(e) = admitted("gateway-api-httproutes-crd.yaml", out)
        {
            failures.push(format!("{}: {e}", case.name()));
        }
        case.check(got.map(|o| o.unwrap_or(Value::Null)), &mut failures);
    }
    finish(failures);
}

/// Argo's Traefik router (`rollout/trafficrouting/traefik`), every TraefikService written admitted by Traefik's
/// CRD, v3's and v2's (the same object, in the group `--traefik-api-group` names).
#[test]
fn every_traefik_service_case_matches_argo_and_the_traefik_crd() {
    let mut failures = Vec::new();
    for case in cases("traefik") {
        let rollout = case.rollout();
        let routing = case.routing(&rollout);
        let desired = Desired::new(&rollout, &routing, case.weight(), "", "");
        let got = traefik::traefik_service(&case.doc["input"], &desired).map_err(|e| e.to_string());
        for crd in [
            "traefik-traefikservices-crd.yaml",
            "traefik-v2-traefikservices-crd.yaml",
        ] {
            if let Ok(Some(out)) = &got
                && let Err(e) = admitted(crd, out)
            {
                failures.push(format!("{}: {crd}: {e}", case.name()));
            }
        }
        case.check(got.map(|o| o.unwrap_or(Value::Null)), &mut failures);
    }
    finish(failures);
}

/// Argo's ALB router (`rollout/trafficrouting/alb`): the action, condition and managed annotations and the
/// header routes' paths it patches into each Ingress, byte for byte, and the Events it records of the writes
/// (when the case names them); every Ingress written valid to `kubernetes-validate --strict`.
#[test]
fn every_alb_ingress_case_matches_argo_and_kubernetes_validate_strict() {
    let dir = tempfile::tempdir().unwrap();
    let mut written = Vec::new();
    let mut failures = Vec::new();
    for case in cases("alb") {
        let rollout = case.rollout();
        let routing = case.routing(&rollout);
        let config = routing.alb.as_ref().unwrap();
        let change = case.managed_change();
        let desired = Desired::new(&rollout, &routing, case.weight(), "", "").with_managed(&change);
        let got = alb::ingress(&case.doc["input"], config, &desired).map_err(|e| e.to_string());
        if let Ok(Some(built)) = &got {
            let path = dir.path().join(case.name());
            std::fs::write(&path, serde_json::to_string(&built.object).unwrap()).unwrap();
            written.push(path);
            let target = Target::AlbIngress {
                namespace: "default",
                name: case.doc["input"]["metadata"]["name"].as_str().unwrap(),
                config,
            };
            check_events(&case, &target, &desired, built.moved, &mut failures);
        }
        case.check(
            got.map(|o| o.map_or(Value::Null, |b| b.object)),
            &mut failures,
        );
    }
    if let Err(e) = kubernetes_validate(&written) {
        failures.push(e);
    }
    finish(failures);
}

/// `.venv/bin/kubernetes-validate --strict` over `files`; the validator's report when it refuses one.
fn kubernetes_validate(files: &[PathBuf]) -> Result<(), String> {
    let tool = root().join(".venv/bin/kubernetes-validate");
    assert!(
        tool.exists(),
        "{} is missing: run tests/run.sh, or python3 -m venv .venv && .venv/bin/pip install -r tests/chart/requirements.txt",
        tool.display()
    );
    let out = Command::new(&tool)
        .arg("--strict")
        .arg("--quiet")
        .args(files)
        .output()
        .unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn ingress_result(result: &CanaryIngress) -> Value {
    match result {
        CanaryIngress::Create(i) => json!({"create": serde_json::to_value(i).unwrap()}),
        CanaryIngress::Patch(p) => json!({"patch": p}),
        CanaryIngress::Unchanged => json!({"unchanged": true}),
    }
}

#[test]
fn every_canary_ingress_case_matches_argo_and_kubernetes_validate_strict() {
    let dir = tempfile::tempdir().unwrap();
    let mut written = Vec::new();
    let mut failures = Vec::new();
    for case in cases("nginx") {
        let rollout = case.rollout();
        let routing = case.routing(&rollout);
        let config = routing.nginx.as_ref().unwrap();
        let desired = Desired::new(&rollout, &routing, case.weight(), "", "");
        let stable: Ingress = serde_json::from_value(case.doc["input"].clone()).unwrap();
        let existing: Option<Ingress> = case
            .doc
            .get("existing")
            .map(|e| serde_json::from_value(e.clone()).unwrap());
        let stable_name = nginx::stable_ingresses(config)[0];
        let got = nginx::canary_ingress(&stable, stable_name, existing.as_ref(), config, &desired)
            .map_err(|e| e.to_string());
        let after = match &got {
            Ok(CanaryIngress::Create(i)) => Some(serde_json::to_value(i).unwrap()),
            Ok(CanaryIngress::Patch(p)) => {
                let mut object = case.doc["existing"].clone();
                json_patch::merge(&mut object, p);
                Some(object)
            }
            _ => None,
        };
        if let Some(mut object) = after {
            object["apiVersion"] = json!("networking.k8s.io/v1");
            object["kind"] = json!("Ingress");
            let path = dir.path().join(case.name());
            std::fs::write(&path, serde_json::to_string(&object).unwrap()).unwrap();
            written.push(path);
        }
        case.check(got.map(|r| ingress_result(&r)), &mut failures);
    }
    if let Err(e) = kubernetes_validate(&written) {
        failures.push(e);
    }
    finish(failures);
}

fn traffic_split_result(result: &TrafficSplitWrite) -> Value {
    match result {
        TrafficSplitWrite::Create(o) => json!({"create": o}),
        TrafficSplitWrite::Patch(p) => json!({"patch": p}),
        TrafficSplitWrite::Unchanged => json!({"unchanged": true}),
    }
}

/// Argo's SMI router (`rollout/trafficrouting/smi`), each version's TrafficSplit admitted by its CRD: Linkerd's
/// for v1alpha1 and v1alpha2, smi-sdk-go's for v1alpha3.
#[test]
fn every_traffic_split_case_matches_argo_and_the_smi_crds() {
    let mut failures = Vec::new();
    for case in cases("smi") {
        let rollout = case.rollout();
        let routing = case.routing(&rollout);
        let config = routing.smi.as_ref().unwrap();
        let version: SmiApiVersion = case.str("version").parse().unwrap();
        let desired = Desired::new(&rollout, &routing, case.weight(), "", "");
        let existing = case.doc.get("existing");
        let got =
            smi::traffic_split(existing, config, version, &desired).map_err(|e| e.to_string());
        let after = match &got {
            Ok(TrafficSplitWrite::Create(o)) => Some(o.clone()),
            Ok(TrafficSplitWrite::Patch(p)) => {
                let mut object = case.doc["existing"].clone();
                json_patch::merge(&mut object, p);
                Some(object)
            }
            _ => None,
        };
        let crd = match version {
            SmiApiVersion::V1alpha3 => "smi-sdk-go-split-crd.yaml",
            _ => "smi-trafficsplits-crd.yaml",
        };
        if let Some(object) = after
            && let Err(e) = admitted(crd, &object)
        {
            failures.push(format!("{}: {e}", case.name()));
        }
        case.check(got.map(|r| traffic_split_result(&r)), &mut failures);
    }
    finish(failures);
}

#[test]
fn the_schema_checks_refuse_a_wrong_type_and_an_undeclared_field() {
    let vs = json!({"apiVersion": "networking.istio.io/v1alpha3", "kind": "VirtualService", "metadata": {"name": "v"},
                    "spec": {"http": [{"route": [{"destination": {"host": "a"}, "weight": "ten"}]}]}});
    assert!(
        admitted("istio-virtualservices-crd.yaml", &vs)
            .unwrap_err()
            .contains("weight")
    );
    let route = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": {"name": "r"},
                       "spec": {"rules": [{"backendRefs": [{"name": "a", "port": 80, "wieght": 1}]}]}});
    assert!(
        admitted("gateway-api-httproutes-crd.yaml", &route)
            .unwrap_err()
            .contains("wieght")
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(&path, r#"{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"i"},"spec":{"rules":[{"host":"a","bogus":1}]}}"#).unwrap();
    assert!(kubernetes_validate(&[path]).is_err());
}
