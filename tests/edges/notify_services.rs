//! The notification services against wiremock: what the webhook, Slack and Teams services send for a rendered
//! notification (Slack's threads by grouping key too), and what each says when the other side refuses
//! (`pkg/services/{webhook,slack,teams}.go`).

use canaryd::engine::notify::config::Service;
use canaryd::engine::notify::subscriptions::Destination;
use canaryd::notify::services::{http_client, send};
use serde_json::{Map, Value, json};
use wiremock::matchers::{body_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn service(kind: &str, options: Value) -> Service {
    Service {
        kind: kind.to_string(),
        options,
    }
}

fn notification(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(fields) => fields,
        _ => Map::new(),
    }
}

fn to(service: &str, recipient: &str) -> Destination {
    Destination {
        service: service.to_string(),
        recipient: recipient.to_string(),
    }
}

#[tokio::test]
async fn slack_posts_the_message_and_its_attachments_to_chat_post_message_with_the_token() {
    let slack = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/chat.postMessage"))
        .and(header("authorization", "Bearer xoxb-token"))
        .and(body_json(json!({
            "channel": "deploys", "text": "Rollout web has been aborted.",
            "attachments": [{"title": "web", "color": "#E01E5A"}],
            "username": "canaryd", "icon_emoji": ":bird:", "unfurl_links": false, "unfurl_media": false,
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": true})))
        .expect(1)
        .mount(&slack)
        .await;
    let options = json!({"token": "xoxb-token", "apiURL": format!("{}/api", slack.uri()), "username": "canaryd", "icon": ":bird:", "disableUnfurl": true});
    let aborted = notification(json!({
        "message": "Rollout web has been aborted.",
        "slack": {"attachments": "[{\"title\": \"web\", \"color\": \"#E01E5A\"}]"},
    }));
    send(
        &http_client(),
        &service("slack", options),
        &aborted,
        &to("slack", "deploys"),
    )
    .await
    .expect("sent");
}

/// Sends `message` to the channel `threads` through a Slack at `slack`, with the template's `slack` fields.
async fn to_thread(slack: &MockServer, message: &str, fields: Value) {
    let options = json!({"token": "t", "apiURL": format!("{}/api", slack.uri())});
    let sent = notification(json!({"message": message, "slack": fields}));
    send(
        &http_client(),
        &service("slack", options),
        &sent,
        &to("slack", "threads"),
    )
    .await
    .expect("sent");
}

#[tokio::test]
async fn slack_threads_a_grouping_key_and_its_delivery_policy_updates_the_first_message() {
    let slack = MockServer::start().await;
    let first_ts = "1700000000.000100";
    Mock::given(method("POST"))
        .and(path("/api/chat.postMessage"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"ok": true, "channel": "C042", "ts": first_ts})),
        )
        .mount(&slack)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/chat.update"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": true})))
        .mount(&slack)
        .await;
    let grouped = |policy: &str| json!({"groupingKey": "web-2", "notifyBroadcast": true, "deliveryPolicy": policy});
    to_thread(&slack, "started", grouped("PostAndUpdate")).await;
    to_thread(&slack, "aborted", grouped("PostAndUpdate")).await;
    to_thread(&slack, "rolled back", grouped("Update")).await;
    to_thread(&slack, "paused", grouped("Post")).await;
    to_thread(&slack, "web-3 started", json!({"groupingKey": "web-3"})).await;
    to_thread(
        &slack,
        "ungrouped",
        json!({"username": "release-bot", "icon": "https://example.com/bot.png"}),
    )
    .await;
    let calls: Vec<(String, Value)> = slack
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| {
            let body = serde_json::from_slice(&r.body).unwrap_or_default();
            (r.url.path().trim_start_matches("/api/").to_string(), body)
        })
        .collect();
    let update = |text: &str| {
        (
            "chat.update".to_string(),
            json!({"channel": "C042", "ts": first_ts, "thread_ts": first_ts, "as_user": true, "text": text}),
        )
    };
    let post = |body: Value| ("chat.postMessage".to_string(), body);
    assert_eq!(
        calls,
        [
            post(json!({"channel": "threads", "text": "started", "reply_broadcast": true})),
            post(
                json!({"channel": "threads", "text": "aborted", "thread_ts": first_ts, "reply_broadcast": true})
            ),
            update("aborted"),
            update("rolled back"),
            post(
                json!({"channel": "threads", "text": "paused", "thread_ts": first_ts, "reply_broadcast": true})
            ),
            post(json!({"channel": "threads", "text": "web-3 started"})),
            post(
                json!({"channel": "threads", "text": "ungrouped", "username": "release-bot", "icon_url": "https://example.com/bot.png"})
            ),
        ]
    );
}

#[tokio::test]
async fn slack_rate_limiting_a_message_is_waited_out_for_its_retry_after_and_sent_once() {
    let slack = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/chat.postMessage"))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "1"))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&slack)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/chat.postMessage"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": true})))
        .mount(&slack)
        .await;
    let started = canaryd::time::monotonic();
    to_thread(&slack, "limited", json!({})).await;
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(1),
        "Retry-After waited"
    );
    let bodies: Vec<Value> = slack
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap_or_default())
        .collect();
    let sent = json!({"channel": "threads", "text": "limited"});
    assert_eq!(bodies, [sent.clone(), sent]);
}

#[tokio::test]
async fn slack_answering_not_ok_is_an_error_with_its_reason() {
    let slack = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"ok": false, "error": "channel_not_found"})),
        )
        .mount(&slack)
        .await;
    let options = json!({"token": "t", "apiURL": slack.uri()});
    let error = send(
        &http_client(),
        &service("slack", options),
        &notification(json!({"message": "m"})),
        &to("slack", "nowhere"),
    )
    .await
    .expect_err("refused");
    assert_eq!(
        error,
        "slack: chat.postMessage answered 200 OK: channel_not_found"
    );
    let options = json!({"token": "t", "apiURL": slack.uri()});
    let broken = notification(json!({"slack": {"attachments": "[{not json"}}));
    let error = send(
        &http_client(),
        &service("slack", options),
        &broken,
        &to("slack", "c"),
    )
    .await
    .expect_err("not JSON");
    assert!(
        error.starts_with("template field `slack.attachments` is not JSON"),
        "{error}"
    );
}

#[tokio::test]
async fn teams_posts_a_message_card_to_the_recipients_webhook_and_wants_1_back() {
    let teams = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/ops"))
        .and(body_json(json!({
            "@type": "MessageCard", "@context": "https://schema.org/extensions",
            "text": "Rollout web has been aborted.", "title": "Aborted", "themeColor": "#E01E5A",
            "sections": [{"activityTitle": "web"}, {"facts": [{"name": "image", "value": "web:2"}]}],
        })))
        .respond_with(ResponseTemplate::new(200).set_body_string("1"))
        .expect(1)
        .mount(&teams)
        .await;
    Mock::given(method("POST"))
        .and(path("/broken"))
        .respond_with(ResponseTemplate::new(200).set_body_string("Webhook message delivery failed"))
        .mount(&teams)
        .await;
    let options = json!({"recipientUrls": {"ops": format!("{}/ops", teams.uri()), "broken": format!("{}/broken", teams.uri())}});
    let aborted = notification(json!({
        "message": "Rollout web has been aborted.",
        "teams": {
            "title": "Aborted", "themeColor": "#E01E5A",
            "sections": "[{\"activityTitle\": \"web\"}]",
            "facts": "[{\"name\": \"image\", \"value\": \"web:2\"}]",
        },
    }));
    let teams_service = service("teams", options);
    send(
        &http_client(),
        &teams_service,
        &aborted,
        &to("teams", "ops"),
    )
    .await
    .expect("sent");
    let refused = send(
        &http_client(),
        &teams_service,
        &aborted,
        &to("teams", "broken"),
    )
    .await;
    assert_eq!(
        refused,
        Err(
            "teams: the incoming webhook answered 200 OK: Webhook message delivery failed"
                .to_string()
        )
    );
    let unknown = send(
        &http_client(),
        &teams_service,
        &aborted,
        &to("teams", "sales"),
    )
    .await;
    assert_eq!(
        unknown,
        Err("teams: no webhook configured for recipient 'sales' (recipientUrls)".to_string())
    );
}

#[tokio::test]
async fn a_webhook_without_a_body_of_its_own_gets_the_message_with_basic_auth_and_a_501_is_not_retried()
 {
    let hook = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/plain"))
        .and(header("authorization", "Basic dXNlcjpwYXNz"))
        .respond_with(ResponseTemplate::new(204))
        .expect(1)
        .mount(&hook)
        .await;
    Mock::given(method("PUT"))
        .and(path("/base/sub"))
        .respond_with(ResponseTemplate::new(501))
        .expect(1)
        .mount(&hook)
        .await;
    let plain = json!({"url": format!("{}/plain", hook.uri()), "basicAuth": {"username": "user", "password": "pass"}});
    send(
        &http_client(),
        &service("webhook", plain),
        &notification(json!({"message": "hello"})),
        &to("hook", ""),
    )
    .await
    .expect("sent");
    let received = hook.received_requests().await.unwrap_or_default();
    assert_eq!(received[0].body, b"hello");
    let based = json!({"url": format!("{}/base/", hook.uri()), "retryWaitMin": 1_000_000, "retryWaitMax": "5ms"});
    let put =
        notification(json!({"webhook": {"hook": {"method": "PUT", "path": "/sub", "body": "b"}}}));
    let error = send(
        &http_client(),
        &service("webhook", based),
        &put,
        &to("hook", ""),
    )
    .await
    .expect_err("501");
    assert!(error.contains("has failed with error code 501"), "{error}");
}

#[tokio::test]
async fn a_service_type_canaryd_does_not_send_is_an_error_naming_it() {
    let error = send(
        &http_client(),
        &service("pagerduty", json!({})),
        &Map::new(),
        &to("pagerduty", "me"),
    )
    .await
    .expect_err("not supported");
    assert_eq!(
        error,
        "service type 'pagerduty' is not supported by canaryd (webhook, slack, teams and email are)"
    );
}
