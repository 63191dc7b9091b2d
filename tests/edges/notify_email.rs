//! The email notification service against the testkit's SMTP server (`pkg/services/email.go`): the envelope,
//! the credentials, the subject and the body (the template's `email.body`, else its message; HTML with
//! `html`) as they arrive, each comma-separated recipient addressed, and what it says when it cannot send.

use canaryd::engine::notify::config::Service;
use canaryd::engine::notify::subscriptions::Destination;
use canaryd::notify::services::{http_client, send};
use canaryd_testkit::smtp::SmtpServer;
use serde_json::{Map, Value, json};

fn email(options: Value) -> Service {
    Service {
        kind: "email".to_string(),
        options,
    }
}

fn notification(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(fields) => fields,
        _ => Map::new(),
    }
}

fn to(recipient: &str) -> Destination {
    Destination {
        service: "email".to_string(),
        recipient: recipient.to_string(),
    }
}

#[tokio::test]
async fn a_mail_arrives_with_the_credentials_subject_and_body_to_each_recipient() {
    let smtp = SmtpServer::start().await;
    let options = json!({"host": "127.0.0.1", "port": smtp.port, "from": "canaryd@example.com",
        "username": "bot", "password": "pa55"});
    let sent = notification(json!({"message": "the message",
        "email": {"subject": "Rollout web aborted", "body": "Rollout web was aborted at step 2"}}));
    send(
        &http_client(),
        &email(options),
        &sent,
        &to("ops@example.com, dev@example.com"),
    )
    .await
    .expect("sent");
    let mails = smtp.mails();
    assert_eq!(mails.len(), 1);
    let mail = &mails[0];
    assert_eq!(mail.login.as_deref(), Some("bot:pa55"));
    assert_eq!(mail.from, "canaryd@example.com");
    assert_eq!(mail.to, ["ops@example.com", "dev@example.com"]);
    let lines: Vec<&str> = mail.data.split("\r\n").collect();
    assert!(
        lines.contains(&"Subject: Rollout web aborted"),
        "{}",
        mail.data
    );
    assert!(
        lines.contains(&"Content-Type: text/plain; charset=utf-8"),
        "{}",
        mail.data
    );
    assert_eq!(
        lines.last(),
        Some(&"Rollout web was aborted at step 2"),
        "{}",
        mail.data
    );
}

#[tokio::test]
async fn without_an_email_body_the_message_is_sent_as_html_with_html_and_no_login_without_a_username()
 {
    let smtp = SmtpServer::start().await;
    let options = json!({"host": "127.0.0.1", "port": smtp.port, "from": "canaryd@example.com", "html": true});
    let sent = notification(json!({"message": "<b>aborted</b>", "email": {"subject": "web"}}));
    send(
        &http_client(),
        &email(options),
        &sent,
        &to("ops@example.com"),
    )
    .await
    .expect("sent");
    let mails = smtp.mails();
    assert_eq!(mails.len(), 1);
    assert_eq!(mails[0].login, None);
    let lines: Vec<&str> = mails[0].data.split("\r\n").collect();
    assert!(
        lines.contains(&"Content-Type: text/html; charset=utf-8"),
        "{}",
        mails[0].data
    );
    assert_eq!(lines.last(), Some(&"<b>aborted</b>"), "{}", mails[0].data);
}

#[tokio::test]
async fn an_address_that_does_not_parse_or_a_server_that_does_not_answer_is_an_error_naming_it() {
    let smtp = SmtpServer::start().await;
    let options = json!({"host": "127.0.0.1", "port": smtp.port, "from": "canaryd@example.com"});
    let sent = notification(json!({"message": "m"}));
    let error = send(
        &http_client(),
        &email(options),
        &sent,
        &to("ops@example.com, not an address"),
    )
    .await
    .expect_err("a bad address");
    assert!(error.contains(r#"address "not an address""#), "{error}");
    assert!(smtp.mails().is_empty());
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = closed.local_addr().expect("its address").port();
    drop(closed);
    let options = json!({"host": "127.0.0.1", "port": port, "from": "canaryd@example.com"});
    let error = send(
        &http_client(),
        &email(options),
        &sent,
        &to("ops@example.com"),
    )
    .await
    .expect_err("no server");
    assert!(
        error.starts_with("email: sending to ops@example.com through 127.0.0.1"),
        "{error}"
    );
}
