//! The web provider against a wiremock server over real sockets and real time: methods, bodies, headers,
//! jsonPath selection and every fault.

use std::time::Duration;

use canaryd::api::WebMetric;
use canaryd::engine::value::MetricValue;
use canaryd::providers::{ProviderError, ProviderResult, Web, WebRequest};
use serde_json::{Value, json};
use wiremock::matchers::{bearer_token, body_json, body_string, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn request(server: &MockServer, extra: Value) -> WebRequest {
    let mut m = json!({"url": format!("{}/api/measurement?service=checkout", server.uri())});
    if let (Some(m), Value::Object(extra)) = (m.as_object_mut(), extra) {
        m.extend(extra);
    }
    let metric: WebMetric = serde_json::from_value(m).unwrap();
    WebRequest::from_metric(&metric).unwrap()
}

async fn fetch(req: &WebRequest) -> Result<ProviderResult, ProviderError> {
    Web::default().fetch(req).await
}

fn json_answer(v: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(v)
}

#[tokio::test]
async fn a_get_returns_the_whole_json_body_and_sends_the_headers() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/api/measurement"))
        .and(wiremock::matchers::query_param("service", "checkout"))
        .and(header("x-team", "payments"))
        .respond_with(json_answer(json!({"ok": true, "rate": 0.99})))
        .expect(1)
        .mount(&server)
        .await;
    let req = request(
        &server,
        json!({"headers": [{"key": "X-Team", "value": "payments"}]}),
    );
    let result = fetch(&req).await.unwrap();
    assert_eq!(
        result.value,
        MetricValue::Json(json!({"ok": true, "rate": 0.99}))
    );
}

#[tokio::test]
async fn a_post_sends_the_text_body_as_written() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(body_string("service=checkout&window=5m"))
        .and(header("content-type", "text/plain"))
        .respond_with(json_answer(json!(1)))
        .expect(1)
        .mount(&server)
        .await;
    let req = request(
        &server,
        json!({
            "method": "POST",
            "body": "service=checkout&window=5m",
            "headers": [{"key": "Content-Type", "value": "text/plain"}]
        }),
    );
    assert_eq!(
        fetch(&req).await.unwrap().value,
        MetricValue::Json(json!(1))
    );
}

#[tokio::test]
async fn a_put_sends_json_body_as_application_json() {
    let server = MockServer::start().await;
    Mock::given(method("PUT"))
        .and(body_json(json!({"service": "checkout", "window": 5})))
        .and(header("content-type", "application/json"))
        .respond_with(json_answer(json!({"data": {"ok": true}})))
        .expect(1)
        .mount(&server)
        .await;
    let req = request(
        &server,
        json!({"method": "PUT", "jsonBody": {"service": "checkout", "window": 5}, "jsonPath": "{$.data.ok}"}),
    );
    assert_eq!(
        fetch(&req).await.unwrap().value,
        MetricValue::Json(json!(true))
    );
}

#[tokio::test]
async fn json_path_selects_indexes_and_the_first_wildcard_match() {
    let body = json!({"results": [{"value": 0.5}, {"value": 0.7}], "items": [{"name": "a"}, {"name": "b"}]});
    for (path, expected) in [
        ("{$.results[1].value}", json!(0.7)),
        ("{$.items[*].name}", json!("a")),
        ("{$.items}", json!([{"name": "a"}, {"name": "b"}])),
    ] {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(json_answer(body.clone()))
            .mount(&server)
            .await;
        let req = request(&server, json!({"jsonPath": path}));
        assert_eq!(
            fetch(&req).await.unwrap().value,
            MetricValue::Json(expected),
            "{path}"
        );
    }
}

#[tokio::test]
async fn a_path_that_selects_nothing_is_an_error_naming_the_path() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(json_answer(json!({"data": {"status": "ok"}})))
        .mount(&server)
        .await;
    let err = fetch(&request(&server, json!({"jsonPath": "{$.data.ok}"})))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "jsonPath {$.data.ok}: selects nothing in the response: no key \"ok\" at $.data"
    );
    assert!(!err.is_transient());
}

#[tokio::test]
async fn a_non_json_body_is_text_without_a_path_and_an_error_with_one() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_string("It worked!"))
        .mount(&server)
        .await;
    let result = fetch(&request(&server, json!({}))).await.unwrap();
    assert_eq!(result.value, MetricValue::Json(json!("It worked!")));
    assert_eq!(result.value.render(), "It worked!");
    let err = fetch(&request(&server, json!({"jsonPath": "{$.ok}"})))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("the response is not JSON"),
        "{err}"
    );
}

#[tokio::test]
async fn a_non_2xx_answer_is_an_error_with_the_status() {
    for (status, transient) in [(500, true), (503, true), (404, false), (403, false)] {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(status).set_body_string("nope"))
            .mount(&server)
            .await;
        let err = fetch(&request(&server, json!({}))).await.unwrap_err();
        assert!(
            matches!(err, ProviderError::Status { status: s, .. } if s == status),
            "{err:?}"
        );
        assert_eq!(err.is_transient(), transient, "{status}");
        assert!(err.to_string().contains(&format!("HTTP {status}")), "{err}");
    }
}

#[tokio::test]
async fn a_slow_answer_beyond_timeout_seconds_is_a_timeout() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(json_answer(json!(1)).set_delay(Duration::from_secs(3)))
        .mount(&server)
        .await;
    let err = fetch(&request(&server, json!({"timeoutSeconds": 1})))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProviderError::Timeout { seconds: 1, .. }),
        "{err:?}"
    );
    assert!(err.is_transient());
}

#[tokio::test]
async fn oauth2_tokens_authorize_web_requests_too() {
    let idp = MockServer::start().await;
    Mock::given(path("/token"))
        .respond_with(json_answer(
            json!({"access_token": "web-tok", "expires_in": 60}),
        ))
        .expect(1)
        .mount(&idp)
        .await;
    let server = MockServer::start().await;
    Mock::given(bearer_token("web-tok"))
        .respond_with(json_answer(json!({"ok": true})))
        .expect(2)
        .mount(&server)
        .await;
    let req = request(
        &server,
        json!({"authentication": {"oauth2": {
            "tokenUrl": format!("{}/token", idp.uri()), "clientId": "c", "clientSecret": "s"
        }}}),
    );
    let web = Web::default();
    web.fetch(&req).await.unwrap();
    web.fetch(&req).await.unwrap();
}

#[tokio::test]
async fn secret_values_in_the_url_are_hidden_in_errors() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let metric: WebMetric = serde_json::from_value(
        json!({"url": format!("http://127.0.0.1:{port}/m?apikey=key-999"), "timeoutSeconds": 2}),
    )
    .unwrap();
    let req = WebRequest::from_metric(&metric)
        .unwrap()
        .with_secret_values(["key-999"]);
    let err = fetch(&req).await.unwrap_err();
    assert!(matches!(err, ProviderError::Connect { .. }), "{err:?}");
    assert!(err.is_transient());
    let msg = err.to_string();
    assert!(
        !msg.contains("key-999") && msg.contains("apikey=*****"),
        "{msg}"
    );
}
