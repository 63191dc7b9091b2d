//! Istio (`trafficRouting.istio`), as Argo Rollouts drives it: the VirtualService's HTTP, TLS and TCP routes
//! re-weighted (canary = desired, stable = the rest, destinations of other hosts with a weight removed); the
//! DestinationRule's subsets in subset mode live in `istio_destination_rule` and are re-exported here. Returns
//! whole objects for an Update, as Argo writes them; must not read or write anything itself.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::{
    Built, Desired, Moved, Reader, RoutingError, config, istio_managed, managed_routes, object_name,
};
use crate::api::traffic_routing::{IstioDestinationRule, IstioTrafficRouting, IstioVirtualService};

pub use super::istio_destination_rule::{destination_rule, destination_rule_delay};

/// Argo's ValidateRolloutVirtualServicesConfig (a `field.InternalError`) and the names every reference needs.
pub(super) fn check(istio: &IstioTrafficRouting, field: &str) -> Result<(), RoutingError> {
    if istio.virtual_service.is_some() == istio.virtual_services.is_some() {
        return Err(config(
            field,
            "Internal error: either VirtualService or VirtualServices must be configured",
        ));
    }
    for vs in virtual_services(istio) {
        if vs.name.is_empty() {
            return Err(config(
                format!("{field}.virtualService.name"),
                "must be set",
            ));
        }
    }
    if let Some(dr) = &istio.destination_rule {
        for (value, name) in [
            (&dr.name, "name"),
            (&dr.canary_subset_name, "canarySubsetName"),
            (&dr.stable_subset_name, "stableSubsetName"),
        ] {
            if value.is_empty() {
                return Err(config(
                    format!("{field}.destinationRule.{name}"),
                    "must be set",
                ));
            }
        }
    }
    Ok(())
}

/// The VirtualServices to re-weight: `virtualService`, or each of `virtualServices`.
pub fn virtual_services(istio: &IstioTrafficRouting) -> Vec<&IstioVirtualService> {
    match (&istio.virtual_service, &istio.virtual_services) {
        (Some(one), _) => vec![one],
        (None, Some(many)) => many.iter().collect(),
        (None, None) => Vec::new(),
    }
}

/// Where a VirtualService reference points: `name.namespace` (the last dot separates the namespace, which
/// cannot contain one; a `.cluster.local` suffix is ignored), or `name` in the Rollout's namespace.
pub fn namespace_and_name<'a>(
    reference: &'a str,
    rollout_namespace: &'a str,
) -> (&'a str, &'a str) {
    let reference = reference
        .strip_suffix(".cluster.local")
        .unwrap_or(reference);
    match reference.rsplit_once('.') {
        Some((name, namespace)) => (namespace, name),
        None => (rollout_namespace, reference),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Http,
    Tls,
    Tcp,
}

impl Kind {
    fn key(self) -> &'static str {
        match self {
            Kind::Http => "http",
            Kind::Tls => "tls",
            Kind::Tcp => "tcp",
        }
    }

    fn config_field(self) -> &'static str {
        match self {
            Kind::Http => "routes",
            Kind::Tls => "tlsRoutes",
            Kind::Tcp => "tcpRoutes",
        }
    }
}

struct Destination {
    host: String,
    subset: String,
    weight: i64,
}

/// The destinations of `route` (at `field`), as Argo's typed structs read them.
fn destinations(r: &Reader, route: &Value, field: &str) -> Result<Vec<Destination>, RoutingError> {
    let route = r.object(route, field)?;
    let field = format!("{field}.route");
    let mut out = Vec::new();
    for (i, d) in r
        .list(route.get("route"), &field)?
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("{field}[{i}]");
        let d = r.object(d, &at)?;
        let weight = r.integer(d, "weight", &at)?;
        let (host, subset) = match d.get("destination") {
            None | Some(Value::Null) => (String::new(), String::new()),
            Some(dest) => {
                let at = format!("{at}.destination");
                let dest = r.object(dest, &at)?;
                (
                    r.string(dest, "host", &at)?.to_string(),
                    r.string(dest, "subset", &at)?.to_string(),
                )
            }
        };
        out.push(Destination {
            // Hosts are compared by their short name: `web.prod.svc.cluster.local` is `web`.
            host: match host.find('.') {
                Some(0) => String::new(),
                Some(dot) => host[..dot].to_string(),
                None => host,
            },
            subset,
            weight,
        });
    }
    Ok(out)
}

/// The ports and SNI hosts a TLS/TCP route matches on; `None` when it matches several ports (never chosen).
fn match_key(
    r: &Reader,
    route: &Value,
    field: &str,
) -> Result<Option<(i64, Vec<String>)>, RoutingError> {
    let route = r.object(route, field)?;
    let mut ports = Vec::new();
    let mut snis: Vec<String> = Vec::new();
    for (i, m) in r
        .list(route.get("match"), &format!("{field}.match"))?
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("{field}.match[{i}]");
        let m = r.object(m, &at)?;
        let port = r.integer(m, "port", &at)?;
        if !ports.contains(&port) {
            ports.push(port);
        }
        for sni in r
            .list(m.get("sniHosts"), &format!("{at}.sniHosts"))?
            .into_iter()
            .flatten()
        {
            if let Some(s) = sni.as_str().filter(|s| !snis.iter().any(|x| x == s)) {
                snis.push(s.to_string());
            }
        }
    }
    Ok((ports.len() <= 1).then(|| (ports.first().copied().unwrap_or(0), snis)))
}

fn same_hosts(a: &[String], b: &[String]) -> bool {
    a.len() == b.len() && b.iter().all(|x| a.contains(x))
}

/// The indices of the routes of `kind` the configuration selects (Argo's get*RouteIndexesToPatch and the
/// exactly-one rule when the configuration names none); HTTP routes with the managed ones
/// (`istio_managed::weighted`).
fn selected(
    r: &Reader,
    kind: Kind,
    routes: &[Value],
    vs: &IstioVirtualService,
    managed: &[String],
) -> Result<Vec<usize>, RoutingError> {
    let field = |i: usize| format!("spec.{}[{i}]", kind.key());
    let wanted: Vec<(i64, Vec<String>)> = match kind {
        Kind::Http => return istio_managed::weighted(r, routes, vs, managed),
        Kind::Tls => vs
            .tls_routes
            .iter()
            .flatten()
            .map(|t| (t.port.unwrap_or(0), t.sni_hosts.clone().unwrap_or_default()))
            .collect(),
        Kind::Tcp => vs
            .tcp_routes
            .iter()
            .flatten()
            .map(|t| (t.port.unwrap_or(0), Vec::new()))
            .collect(),
    };
    if wanted.is_empty() {
        return match routes.len() {
            0 => Ok(Vec::new()),
            1 => Ok(vec![0]),
            _ => Err(RoutingError::Mismatch(format!(
                "spec.{}[] should be set in VirtualService and it must have exactly one route when omitting spec.strategy.canary.trafficRouting.istio.virtualService.{}",
                kind.key(),
                kind.config_field()
            ))),
        };
    }
    let mut out = Vec::new();
    for (port, snis) in wanted {
        let mut any = false;
        for (i, route) in routes.iter().enumerate() {
            if let Some((p, s)) = match_key(r, route, &field(i))?
                && p == port
                && (kind == Kind::Tcp || same_hosts(&snis, &s))
            {
                out.push(i);
                any = true;
            }
        }
        if !any {
            let what = if kind == Kind::Tls { "TLS" } else { "TCP" };
            return Err(RoutingError::Mismatch(format!(
                "No matching {what} routes found in the defined Virtual Service."
            )));
        }
    }
    Ok(out)
}

/// Argo's validateVirtualServiceRouteDestinations: a chosen route must reach both sides.
fn reaches_both(
    dests: &[Destination],
    dr: Option<&IstioDestinationRule>,
    d: &Desired,
) -> Result<(), RoutingError> {
    let has = |f: &dyn Fn(&Destination) -> bool| dests.iter().any(f);
    let missing = |what: &str, name: &str| {
        RoutingError::Mismatch(format!("{what} '{name}' not found in route"))
    };
    match dr {
        Some(dr) => {
            if !has(&|x| !dr.canary_subset_name.is_empty() && x.subset == dr.canary_subset_name) {
                return Err(missing(
                    "Canary DestinationRule subset",
                    &dr.canary_subset_name,
                ));
            }
            if !has(&|x| !dr.stable_subset_name.is_empty() && x.subset == dr.stable_subset_name) {
                return Err(missing(
                    "Stable DestinationRule subset",
                    &dr.stable_subset_name,
                ));
            }
        }
        None => {
            if !has(&|x| !d.canary_service.is_empty() && x.host == d.canary_service) {
                return Err(missing("Canary Service", d.canary_service));
            }
            if !has(&|x| !d.stable_service.is_empty() && x.host == d.stable_service) {
                return Err(missing("Stable Service", d.stable_service));
            }
        }
    }
    Ok(())
}

/// The new destination list of one route: canary = desired, stable = the rest after the canary and the
/// additional subsets (kept as they are), any other destination with a weight removed (Argo's
/// processRoutes without experiments). `None` when nothing changes.
fn reweighted(
    route: &Value,
    dests: &[Destination],
    dr: Option<&IstioDestinationRule>,
    d: &Desired,
) -> Option<Vec<Value>> {
    let subset_is = |s: &str, name: &str| !s.is_empty() && s == name;
    let (canary_subset, stable_subset) = dr.map_or(("", ""), |dr| {
        (
            dr.canary_subset_name.as_str(),
            dr.stable_subset_name.as_str(),
        )
    });
    let additional: Vec<&str> = dr
        .and_then(|dr| dr.additional_subset_names.as_ref())
        .map(|v| v.iter().map(String::as_str).collect())
        .unwrap_or_default();
    let is_additional = |s: &str| !s.is_empty() && additional.contains(&s);
    let others: i64 = dests
        .iter()
        .filter(|x| is_additional(&x.subset))
        .map(|x| x.weight)
        .sum();
    let stable = d.stable_weight(others);
    let canary = i64::from(d.canary_weight);
    let raw = route.get("route")?.as_array()?;
    let mut out = Vec::with_capacity(raw.len());
    let mut changed = false;
    for (x, value) in dests.iter().zip(raw) {
        let want = if x.host.is_empty() {
            None
        } else if x.host == d.canary_service || subset_is(&x.subset, canary_subset) {
            Some(canary)
        } else if x.host == d.stable_service || subset_is(&x.subset, stable_subset) {
            Some(stable)
        } else if is_additional(&x.subset) {
            None
        } else if x.weight != 0 {
            changed = true;
            continue;
        } else {
            None
        };
        match want {
            Some(w) if w != x.weight => {
                let mut value = value.clone();
                if let Some(obj) = value.as_object_mut() {
                    obj.insert("weight".to_string(), Value::from(w));
                }
                changed = true;
                out.push(value);
            }
            _ => out.push(value.clone()),
        }
    }
    changed.then_some(out)
}

/// The VirtualService `current` (as read) with the managed routes changed as `d` says
/// (`istio_managed::apply`) and the configured routes at the desired weights, for an Update that keeps its
/// resourceVersion, with what of it moved; `Ok(None)` when it already shows them. `vs` is the reference that
/// named it; `dr` the DestinationRule of subset mode.
pub fn virtual_service(
    current: &Value,
    vs: &IstioVirtualService,
    dr: Option<&IstioDestinationRule>,
    d: &Desired,
) -> Result<Option<Built>, RoutingError> {
    let Some(changes) = changes(current, vs, dr, d)? else {
        return Ok(None);
    };
    let mut out = current.clone();
    if let (Some(Cow::Owned(http)), Some(spec)) = (
        changes.http,
        out.get_mut("spec").and_then(Value::as_object_mut),
    ) {
        spec.insert("http".to_string(), Value::Array(http));
    }
    for (kind, i, new) in changes.routes {
        if let Some(route) = out
            .pointer_mut(&format!("/spec/{}/{i}", kind.key()))
            .and_then(Value::as_object_mut)
        {
            route.insert("route".to_string(), Value::Array(new));
        }
    }
    Ok(Some(Built {
        object: out,
        moved: changes.moved,
    }))
}

/// Whether [`virtual_service`] can bring `current` to `d`, without making the object.
pub fn check_virtual_service(
    current: &Value,
    vs: &IstioVirtualService,
    dr: Option<&IstioDestinationRule>,
    d: &Desired,
) -> Result<(), RoutingError> {
    changes(current, vs, dr, d).map(drop)
}

/// What [`virtual_service`] changes of a VirtualService.
struct Changes<'a> {
    /// The `http` list: owned when the managed routes changed it, else as read (if there is one).
    http: Option<Cow<'a, [Value]>>,
    /// The new `route` of each route re-weighted, by kind and index.
    routes: Vec<(Kind, usize, Vec<Value>)>,
    moved: Moved,
}

/// The changes that bring `current` to `d`; `None` when it already shows them.
fn changes<'a>(
    current: &'a Value,
    vs: &IstioVirtualService,
    dr: Option<&IstioDestinationRule>,
    d: &Desired,
) -> Result<Option<Changes<'a>>, RoutingError> {
    let r = Reader {
        kind: "VirtualService",
        name: object_name(current),
    };
    let spec = match current.get("spec") {
        None | Some(Value::Null) => &Map::new(),
        Some(spec) => r.object(spec, "spec")?,
    };
    let managed = managed_routes::names(
        d.rollout
            .spec
            .canary()
            .and_then(|c| c.traffic_routing.as_ref()),
    );
    // Argo changes the managed routes (SetHeaderRoute, SetMirrorRoute, RemoveManagedRoutes) before SetWeight.
    // The routes are copied only when a managed route may change (a header or mirror step's plans). Read from
    // `current` (not `spec`, which may be a map made here) so that the routes as read outlive this.
    let listed = r.list(current.get("spec").and_then(|s| s.get("http")), "spec.http")?;
    let (http, routes_moved) = match listed {
        Some(read) if d.managed.changes() => {
            let mut http = read.clone();
            let moved = istio_managed::apply(&r, &mut http, d.managed, vs, dr, d, &managed)?;
            let http = if moved.routes_removed || moved.route_set {
                Cow::Owned(http)
            } else {
                Cow::Borrowed(read.as_slice())
            };
            (Some(http), moved)
        }
        _ => (
            listed.map(|read| Cow::Borrowed(read.as_slice())),
            Moved::default(),
        ),
    };
    let mut routes: Vec<(Kind, usize, Vec<Value>)> = Vec::new();
    let mut any_routes = false;
    for kind in [Kind::Http, Kind::Tls, Kind::Tcp] {
        let listed = match kind {
            Kind::Http => http.as_deref(),
            _ => r
                .list(spec.get(kind.key()), &format!("spec.{}", kind.key()))?
                .map(Vec::as_slice),
        };
        let Some(listed) = listed else {
            continue;
        };
        any_routes = true;
        let chosen = selected(&r, kind, listed, vs, &managed)?;
        for i in chosen {
            let field = format!("spec.{}[{i}]", kind.key());
            let dests = destinations(&r, &listed[i], &field)?;
            reaches_both(&dests, dr, d)?;
            if let Some(new) = reweighted(&listed[i], &dests, dr, d) {
                routes.push((kind, i, new));
            }
        }
    }
    if !any_routes {
        return Err(RoutingError::Mismatch(
            "Unable to get any of the HTTP, TCP or TLS routes for the Istio VirtualService"
                .to_string(),
        ));
    }
    let http_changed = routes_moved.routes_removed || routes_moved.route_set;
    if routes.is_empty() && !http_changed {
        return Ok(None);
    }
    let moved = Moved {
        weights: !routes.is_empty(),
        ..routes_moved
    };
    Ok(Some(Changes {
        http,
        routes,
        moved,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_virtual_service_reference_may_name_its_namespace_after_the_last_dot() {
        assert_eq!(namespace_and_name("vsvc", "prod"), ("prod", "vsvc"));
        assert_eq!(namespace_and_name("vsvc.mesh", "prod"), ("mesh", "vsvc"));
        assert_eq!(
            namespace_and_name("my.vsvc.mesh.cluster.local", "prod"),
            ("mesh", "my.vsvc")
        );
    }
}
