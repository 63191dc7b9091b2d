use super::*;

fn metric(yaml: serde_json::Value) -> PrometheusMetric {
    serde_json::from_value(yaml).unwrap()
}

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

#[test]
fn template_address_wins_over_the_default() {
    let m = metric(serde_json::json!({"address": "http://a:9090/", "query": "up"}));
    let r = PrometheusRequest::from_metric(&m, Some("http://b"), ts("2026-01-01T00:00:00Z"), None)
        .unwrap();
    assert_eq!(r.address, "http://a:9090");
    let m = metric(serde_json::json!({"query": "up"}));
    let r = PrometheusRequest::from_metric(&m, Some("http://b"), ts("2026-01-01T00:00:00Z"), None)
        .unwrap();
    assert_eq!(r.address, "http://b");
}

#[test]
fn canaryd_env_var_wins_over_argos_and_empty_counts_as_unset() {
    let env = |vars: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    };
    let both = env(&[
        ("CANARYD_PROMETHEUS_ADDRESS", "http://canaryd"),
        ("ARGO_ROLLOUTS_PROMETHEUS_ADDRESS", "http://argo"),
    ]);
    assert_eq!(
        default_address_from(both).as_deref(),
        Some("http://canaryd")
    );
    let empty_canaryd = env(&[
        ("CANARYD_PROMETHEUS_ADDRESS", " "),
        ("ARGO_ROLLOUTS_PROMETHEUS_ADDRESS", "http://argo"),
    ]);
    assert_eq!(
        default_address_from(empty_canaryd).as_deref(),
        Some("http://argo")
    );
    assert_eq!(default_address_from(env(&[])), None);
}

#[test]
fn a_missing_address_says_where_to_set_one() {
    let m = metric(serde_json::json!({"query": "up"}));
    let err = PrometheusRequest::from_metric(&m, None, Timestamp::UNIX_EPOCH, None).unwrap_err();
    assert!(err.to_string().contains("--prometheus"), "{err}");
    assert!(
        err.to_string().contains("CANARYD_PROMETHEUS_ADDRESS"),
        "{err}"
    );
}

#[test]
fn an_address_that_is_not_a_url_is_refused() {
    let m = metric(serde_json::json!({"address": "prometheus:9090", "query": "up"}));
    let err = PrometheusRequest::from_metric(&m, None, Timestamp::UNIX_EPOCH, None).unwrap_err();
    assert!(
        err.to_string()
            .contains("is not an http:// or https:// URL"),
        "{err}"
    );
}

#[test]
fn timeout_defaults_to_thirty_seconds_and_must_be_positive() {
    let m = metric(serde_json::json!({"address": "http://p", "query": "up"}));
    let r = PrometheusRequest::from_metric(&m, None, Timestamp::UNIX_EPOCH, None).unwrap();
    assert_eq!(r.timeout, Duration::from_secs(30));
    let m = metric(serde_json::json!({"address": "http://p", "query": "up", "timeout": -1}));
    assert!(PrometheusRequest::from_metric(&m, None, Timestamp::UNIX_EPOCH, None).is_err());
}

#[test]
fn range_windows_are_evaluated_at_the_backtest_time_when_there_is_one() {
    let m = metric(serde_json::json!({
        "address": "http://p", "query": "up",
        "rangeQuery": {"start": "now() - duration(\"10m\")", "end": "now()", "step": "1m"}
    }));
    let now = ts("2026-01-01T12:00:00Z");
    let virtual_now = ts("2025-06-01T00:00:00Z");
    let live = PrometheusRequest::from_metric(&m, None, now, None).unwrap();
    assert_eq!(
        live.kind,
        QueryKind::Range {
            start: ts("2026-01-01T11:50:00Z"),
            end: now,
            step: Duration::from_secs(60)
        }
    );
    let back = PrometheusRequest::from_metric(&m, None, now, Some(virtual_now)).unwrap();
    assert!(matches!(back.kind, QueryKind::Range { end, .. } if end == virtual_now));
}

#[test]
fn range_errors_name_the_field() {
    let m = metric(serde_json::json!({
        "address": "http://p", "query": "up",
        "rangeQuery": {"start": "now() - 5m", "end": "now()", "step": "1m"}
    }));
    let err = PrometheusRequest::from_metric(&m, None, Timestamp::UNIX_EPOCH, None).unwrap_err();
    assert!(
        err.to_string().starts_with("prometheus.rangeQuery.start: "),
        "{err}"
    );
    let m = metric(serde_json::json!({
        "address": "http://p", "query": "up",
        "rangeQuery": {"start": "now()", "end": "now()", "step": "0s"}
    }));
    let err = PrometheusRequest::from_metric(&m, None, Timestamp::UNIX_EPOCH, None).unwrap_err();
    assert!(
        err.to_string().contains("step must be greater than zero"),
        "{err}"
    );
}

#[test]
fn debug_output_hides_every_secret() {
    let m = metric(serde_json::json!({
        "address": "http://p", "query": "sum(x{token=\"tok-123\"})",
        "headers": [{"key": "X-Api-Key", "value": "hdr-secret"}],
        "authentication": {
            "basicAuth": {"username": "bob", "password": "pw-secret"},
        }
    }));
    let r = PrometheusRequest::from_metric(&m, None, Timestamp::UNIX_EPOCH, None)
        .unwrap()
        .with_secret_values(["tok-123"]);
    let shown = format!("{r:?}");
    for secret in ["tok-123", "hdr-secret", "pw-secret"] {
        assert!(!shown.contains(secret), "{secret} leaked: {shown}");
    }
    assert!(
        shown.contains("x-api-key") && shown.contains("bob"),
        "{shown}"
    );

    let m = metric(serde_json::json!({
        "address": "http://p", "query": "up",
        "authentication": {"oauth2": {"tokenUrl": "http://idp/t", "clientId": "c", "clientSecret": "cs-secret"}}
    }));
    let r = PrometheusRequest::from_metric(&m, None, Timestamp::UNIX_EPOCH, None).unwrap();
    assert!(!format!("{r:?}").contains("cs-secret"));
}

#[test]
fn sample_values_cover_prometheus_spellings() {
    assert_eq!(parse_sample("1e-3"), Some(0.001));
    assert!(parse_sample("NaN").is_some_and(f64::is_nan));
    assert_eq!(parse_sample("+Inf"), Some(f64::INFINITY));
    assert_eq!(parse_sample("-Inf"), Some(f64::NEG_INFINITY));
    assert_eq!(parse_sample("infinity"), None);
    assert_eq!(parse_sample("abc"), None);
}
