//! The Prometheus provider against a wiremock server over real sockets and real time: what it sends (method,
//! path, form fields, headers, credentials) and how every answer and fault comes back.

use std::collections::BTreeMap;
use std::time::Duration;

use canaryd::api::PrometheusMetric;
use canaryd::engine::value::MetricValue;
use canaryd::providers::{HttpClients, Prometheus, PrometheusRequest, ProviderError};
use jiff::Timestamp;
use serde_json::{Value, json};
use wiremock::matchers::{
    basic_auth, bearer_token, body_string_contains, header, header_exists, method, path,
};
use wiremock::{Mock, MockServer, ResponseTemplate};

const VECTOR: &[u8] = include_bytes!("../fixtures/prometheus/vector.json");
const MATRIX: &[u8] = include_bytes!("../fixtures/prometheus/matrix.json");

fn now() -> Timestamp {
    "2026-01-01T12:00:00Z".parse().unwrap()
}

fn request(server: &MockServer, extra: Value) -> PrometheusRequest {
    let mut m = json!({"address": server.uri(), "query": "up"});
    if let (Some(m), Value::Object(extra)) = (m.as_object_mut(), extra) {
        m.extend(extra);
    }
    let metric: PrometheusMetric = serde_json::from_value(m).unwrap();
    PrometheusRequest::from_metric(&metric, None, now(), None).unwrap()
}

fn answer(status: u16, body: &[u8]) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_raw(body.to_vec(), "application/json")
}

async fn serve(server: &MockServer, api_path: &str, response: ResponseTemplate) {
    Mock::given(path(api_path))
        .respond_with(response)
        .mount(server)
        .await;
}

/// The form fields of the only request the server received.
async fn only_form(server: &MockServer) -> (wiremock::Request, BTreeMap<String, String>) {
    let mut received = server.received_requests().await.unwrap();
    assert_eq!(received.len(), 1, "expected exactly one request");
    let r = received.remove(0);
    let body = String::from_utf8(r.body.clone()).unwrap();
    let fields = reqwest::Url::parse(&format!("http://form/?{body}"))
        .unwrap()
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    (r, fields)
}

async fn query(
    req: &PrometheusRequest,
) -> Result<canaryd::providers::ProviderResult, ProviderError> {
    Prometheus::default().query(req).await
}

#[tokio::test]
async fn an_instant_query_is_posted_as_a_form_without_a_time() {
    let server = MockServer::start().await;
    serve(&server, "/api/v1/query", answer(200, VECTOR)).await;
    let result = query(&request(&server, json!({"query": "sum(rate(x[5m]))"})))
        .await
        .unwrap();
    assert_eq!(result.value, MetricValue::Numbers(vec![0.5, 0.001, 2.0]));
    assert_eq!(
        result.metadata["ResolvedPrometheusQuery"],
        "sum(rate(x[5m]))"
    );

    let (r, fields) = only_form(&server).await;
    assert_eq!(r.method.as_str(), "POST");
    assert_eq!(
        r.headers.get("content-type").unwrap(),
        "application/x-www-form-urlencoded"
    );
    assert_eq!(
        fields,
        BTreeMap::from([("query".to_string(), "sum(rate(x[5m]))".to_string())])
    );
}

#[tokio::test]
async fn a_backtest_evaluates_the_instant_query_at_the_virtual_time() {
    let server = MockServer::start().await;
    serve(&server, "/api/v1/query", answer(200, VECTOR)).await;
    let metric: PrometheusMetric =
        serde_json::from_value(json!({"address": server.uri(), "query": "up"})).unwrap();
    let at: Timestamp = "2025-06-01T08:30:00Z".parse().unwrap();
    let req = PrometheusRequest::from_metric(&metric, None, now(), Some(at)).unwrap();
    query(&req).await.unwrap();
    let (_, fields) = only_form(&server).await;
    assert_eq!(fields["time"], "2025-06-01T08:30:00Z");
}

#[tokio::test]
async fn a_range_query_sends_start_end_and_step_and_flattens_the_matrix() {
    let server = MockServer::start().await;
    serve(&server, "/api/v1/query_range", answer(200, MATRIX)).await;
    let req = request(
        &server,
        json!({"rangeQuery": {"start": "now() - duration(\"10m\")", "end": "now()", "step": "1m30s"}}),
    );
    let result = query(&req).await.unwrap();
    assert_eq!(result.value.render(), "[1,2,3,NaN]");
    let (r, fields) = only_form(&server).await;
    assert_eq!(r.url.path(), "/api/v1/query_range");
    assert_eq!(fields["query"], "up");
    assert_eq!(fields["start"], "2026-01-01T11:50:00Z");
    assert_eq!(fields["end"], "2026-01-01T12:00:00Z");
    assert_eq!(fields["step"], "90");
}

#[tokio::test]
async fn every_result_type_converts_the_way_argo_does() {
    let cases: [(&[u8], &str); 4] = [
        (include_bytes!("../fixtures/prometheus/scalar.json"), "0.97"),
        (
            include_bytes!("../fixtures/prometheus/vector_empty.json"),
            "[]",
        ),
        (
            include_bytes!("../fixtures/prometheus/vector_special.json"),
            "[NaN,+Inf,-Inf]",
        ),
        (VECTOR, "[0.5,0.001,2]"),
    ];
    for (body, rendered) in cases {
        let server = MockServer::start().await;
        serve(&server, "/api/v1/query", answer(200, body)).await;
        let result = query(&request(&server, json!({}))).await.unwrap();
        assert_eq!(result.value.render(), rendered);
    }
}

#[tokio::test]
async fn warnings_and_infos_land_in_metadata_in_argos_form() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/api/v1/query",
        answer(200, include_bytes!("../fixtures/prometheus/warnings.json")),
    )
    .await;
    let result = query(&request(&server, json!({}))).await.unwrap();
    assert_eq!(result.value, MetricValue::Numbers(vec![1.0]));
    let warnings = &result.metadata["warnings"];
    assert!(
        warnings.starts_with("\"PromQL warning: metric might not be a counter"),
        "{warnings}"
    );
    assert_eq!(
        result.metadata["infos"],
        "\"PromQL info: ignoring stale series\""
    );
}

#[tokio::test]
async fn a_bad_query_returns_prometheus_own_message_and_is_not_transient() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/api/v1/query",
        answer(
            400,
            include_bytes!("../fixtures/prometheus/error_bad_data.json"),
        ),
    )
    .await;
    let err = query(&request(&server, json!({}))).await.unwrap_err();
    match &err {
        ProviderError::Prometheus {
            http_status,
            error_type,
            message,
        } => {
            assert_eq!(*http_status, Some(400));
            assert_eq!(error_type, "bad_data");
            assert!(message.contains("unexpected end of input"));
        }
        other => panic!("{other:?}"),
    }
    assert!(!err.is_transient());
}

#[tokio::test]
async fn a_status_error_with_http_200_is_still_an_error() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/api/v1/query",
        answer(
            200,
            include_bytes!("../fixtures/prometheus/error_bad_data.json"),
        ),
    )
    .await;
    let err = query(&request(&server, json!({}))).await.unwrap_err();
    assert!(err.to_string().contains("(bad_data)"), "{err}");
}

#[tokio::test]
async fn a_server_error_with_a_prometheus_body_is_transient_and_keeps_the_message() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/api/v1/query",
        answer(
            503,
            include_bytes!("../fixtures/prometheus/error_timeout.json"),
        ),
    )
    .await;
    let err = query(&request(&server, json!({}))).await.unwrap_err();
    assert!(err.is_transient());
    assert!(
        err.to_string()
            .contains("query timed out in expression evaluation"),
        "{err}"
    );
}

#[tokio::test]
async fn a_server_error_without_a_prometheus_body_shows_status_and_excerpt() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/api/v1/query",
        ResponseTemplate::new(502).set_body_string("<html><h1>502 Bad Gateway</h1></html>"),
    )
    .await;
    let err = query(&request(&server, json!({}))).await.unwrap_err();
    assert!(
        matches!(err, ProviderError::Status { status: 502, .. }),
        "{err:?}"
    );
    assert!(err.is_transient());
    assert!(
        err.to_string()
            .contains("HTTP 502: <html><h1>502 Bad Gateway"),
        "{err}"
    );
}

#[tokio::test]
async fn a_client_error_without_a_prometheus_body_is_not_transient() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/api/v1/query",
        ResponseTemplate::new(404).set_body_string("not found"),
    )
    .await;
    let err = query(&request(&server, json!({}))).await.unwrap_err();
    assert!(
        matches!(err, ProviderError::Status { status: 404, .. }),
        "{err:?}"
    );
    assert!(!err.is_transient());
}

#[tokio::test]
async fn malformed_json_is_an_error_saying_so() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/api/v1/query",
        answer(200, include_bytes!("../fixtures/prometheus/truncated.json")),
    )
    .await;
    let err = query(&request(&server, json!({}))).await.unwrap_err();
    assert!(err.to_string().contains("not valid JSON"), "{err}");
    assert!(!err.is_transient());
}

#[tokio::test]
async fn a_string_result_is_an_error() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/api/v1/query",
        answer(200, include_bytes!("../fixtures/prometheus/string.json")),
    )
    .await;
    let err = query(&request(&server, json!({}))).await.unwrap_err();
    assert!(err.to_string().contains("string result"), "{err}");
}

#[tokio::test]
async fn a_slow_answer_beyond_the_timeout_is_a_transient_timeout() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/api/v1/query",
        answer(200, VECTOR).set_delay(Duration::from_secs(3)),
    )
    .await;
    let err = query(&request(&server, json!({"timeout": 1})))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProviderError::Timeout { seconds: 1, .. }),
        "{err:?}"
    );
    assert!(err.is_transient());
    assert!(err.to_string().contains("within 1 s"), "{err}");
}

#[tokio::test]
async fn a_slow_prometheus_does_not_hold_up_another_metric() {
    let slow = MockServer::start().await;
    serve(
        &slow,
        "/api/v1/query",
        answer(200, VECTOR).set_delay(Duration::from_secs(2)),
    )
    .await;
    let fast = MockServer::start().await;
    serve(&fast, "/api/v1/query", answer(200, VECTOR)).await;
    // One provider for both, as the runner uses it; both requests have the same client shape.
    let provider = Prometheus::new(HttpClients::new());
    let (slow_req, fast_req) = (request(&slow, json!({})), request(&fast, json!({})));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (p, t) = (provider.clone(), tx.clone());
    let slow_task = tokio::spawn(async move {
        let r = p.query(&slow_req).await;
        t.send(("slow", r.is_ok())).unwrap();
    });
    let (p, t) = (provider.clone(), tx);
    let fast_task = tokio::spawn(async move {
        let r = p.query(&fast_req).await;
        t.send(("fast", r.is_ok())).unwrap();
    });
    let first = rx.recv().await.unwrap();
    let second = rx.recv().await.unwrap();
    slow_task.await.unwrap();
    fast_task.await.unwrap();
    assert_eq!((first, second), (("fast", true), ("slow", true)));
}

#[tokio::test]
async fn a_refused_connection_is_a_transient_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let metric: PrometheusMetric = serde_json::from_value(
        json!({"address": format!("http://127.0.0.1:{port}"), "query": "up", "timeout": 2}),
    )
    .unwrap();
    let req = PrometheusRequest::from_metric(&metric, None, now(), None).unwrap();
    let err = query(&req).await.unwrap_err();
    assert!(matches!(err, ProviderError::Connect { .. }), "{err:?}");
    assert!(err.is_transient());
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
    assert!(err.to_string().contains("Connection refused"), "{err}");
}

#[tokio::test]
async fn custom_headers_are_sent() {
    let server = MockServer::start().await;
    Mock::given(path("/api/v1/query"))
        .and(header("x-scope-orgid", "tenant_a"))
        .respond_with(answer(200, VECTOR))
        .expect(1)
        .mount(&server)
        .await;
    query(&request(
        &server,
        json!({"headers": [{"key": "X-Scope-OrgID", "value": "tenant_a"}]}),
    ))
    .await
    .unwrap();
}

#[tokio::test]
async fn basic_auth_credentials_are_sent() {
    let server = MockServer::start().await;
    Mock::given(path("/api/v1/query"))
        .and(basic_auth("bob", "pw-secret"))
        .respond_with(answer(200, VECTOR))
        .expect(1)
        .mount(&server)
        .await;
    let req = request(
        &server,
        json!({"authentication": {"basicAuth": {"username": "bob", "password": "pw-secret"}}}),
    );
    query(&req).await.unwrap();
}

fn oauth(idp: &MockServer) -> Value {
    json!({"authentication": {"oauth2": {
        "tokenUrl": format!("{}/token", idp.uri()),
        "clientId": "my-client",
        "clientSecret": "cs-secret",
        "scopes": ["read", "write"]
    }}})
}

#[tokio::test]
async fn an_oauth2_token_is_fetched_once_and_reused() {
    let idp = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/token"))
        .and(basic_auth("my-client", "cs-secret"))
        .and(body_string_contains("grant_type=client_credentials"))
        .and(body_string_contains("scope=read+write"))
        .respond_with(ResponseTemplate::new(200).set_body_json(
            json!({"access_token": "tok-1", "token_type": "Bearer", "expires_in": 3600}),
        ))
        .expect(1)
        .mount(&idp)
        .await;
    let prom = MockServer::start().await;
    Mock::given(path("/api/v1/query"))
        .and(bearer_token("tok-1"))
        .respond_with(answer(200, VECTOR))
        .expect(2)
        .mount(&prom)
        .await;
    let provider = Prometheus::default();
    let req = request(&prom, oauth(&idp));
    provider.query(&req).await.unwrap();
    provider.query(&req).await.unwrap();
    idp.verify().await;
    prom.verify().await;
}

#[tokio::test]
async fn client_credentials_move_to_the_form_when_the_token_server_refuses_the_header() {
    let idp = MockServer::start().await;
    Mock::given(path("/token"))
        .and(header_exists("authorization"))
        .respond_with(ResponseTemplate::new(401))
        .mount(&idp)
        .await;
    Mock::given(path("/token"))
        .and(body_string_contains("client_id=my-client"))
        .and(body_string_contains("client_secret=cs-secret"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"access_token": "tok-2"})))
        .mount(&idp)
        .await;
    let prom = MockServer::start().await;
    Mock::given(bearer_token("tok-2"))
        .respond_with(answer(200, VECTOR))
        .expect(1)
        .mount(&prom)
        .await;
    query(&request(&prom, oauth(&idp))).await.unwrap();
}

#[tokio::test]
async fn a_refused_token_is_fetched_again_on_the_next_call() {
    let idp = MockServer::start().await;
    Mock::given(path("/token"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"access_token": "tok-3"})))
        .expect(2)
        .mount(&idp)
        .await;
    let prom = MockServer::start().await;
    Mock::given(path("/api/v1/query"))
        .respond_with(ResponseTemplate::new(401).set_body_string("expired"))
        .up_to_n_times(1)
        .mount(&prom)
        .await;
    serve(&prom, "/api/v1/query", answer(200, VECTOR)).await;
    let provider = Prometheus::default();
    let req = request(&prom, oauth(&idp));
    let err = provider.query(&req).await.unwrap_err();
    assert!(
        matches!(err, ProviderError::Status { status: 401, .. }),
        "{err:?}"
    );
    provider.query(&req).await.unwrap();
    idp.verify().await;
}

#[tokio::test]
async fn a_failing_token_server_is_reported_without_the_client_secret() {
    let idp = MockServer::start().await;
    Mock::given(path("/token"))
        .respond_with(
            ResponseTemplate::new(400).set_body_string("invalid_client: cs-secret is wrong"),
        )
        .mount(&idp)
        .await;
    let prom = MockServer::start().await;
    let err = query(&request(&prom, oauth(&idp))).await.unwrap_err();
    assert!(matches!(err, ProviderError::Token { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("HTTP 400") && msg.contains("invalid_client"),
        "{msg}"
    );
    assert!(!msg.contains("cs-secret"), "{msg}");
    assert!(!err.is_transient());
    assert!(prom.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn secret_values_never_reach_error_messages_or_metadata() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/api/v1/query",
        answer(
            422,
            br#"{"status":"error","errorType":"execution","error":"bad label value \"tok-777\""}"#,
        ),
    )
    .await;
    let req =
        request(&server, json!({"query": "up{token=\"tok-777\"}"})).with_secret_values(["tok-777"]);
    let err = query(&req).await.unwrap_err();
    assert!(!err.to_string().contains("tok-777"), "{err}");
    assert!(!format!("{err:?}").contains("tok-777"), "{err:?}");
    assert!(err.to_string().contains("*****"), "{err}");

    let server = MockServer::start().await;
    serve(&server, "/api/v1/query", answer(200, VECTOR)).await;
    let req =
        request(&server, json!({"query": "up{token=\"tok-777\"}"})).with_secret_values(["tok-777"]);
    let result = query(&req).await.unwrap();
    assert_eq!(
        result.metadata["ResolvedPrometheusQuery"],
        "up{token=\"*****\"}"
    );
}

#[tokio::test]
async fn post_refused_by_a_proxy_falls_back_to_get() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(405))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/api/v1/query"))
        .and(wiremock::matchers::query_param("query", "up"))
        .respond_with(answer(200, VECTOR))
        .expect(1)
        .mount(&server)
        .await;
    let result = query(&request(&server, json!({}))).await.unwrap();
    assert_eq!(result.value, MetricValue::Numbers(vec![0.5, 0.001, 2.0]));
}

#[tokio::test]
async fn an_address_with_a_path_prefix_keeps_it() {
    let server = MockServer::start().await;
    serve(&server, "/prometheus/api/v1/query", answer(200, VECTOR)).await;
    let metric: PrometheusMetric = serde_json::from_value(
        json!({"address": format!("{}/prometheus/", server.uri()), "query": "up"}),
    )
    .unwrap();
    let req = PrometheusRequest::from_metric(&metric, None, now(), None).unwrap();
    query(&req).await.unwrap();
}
