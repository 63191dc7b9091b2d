//! The `email` notification service as the notifications engine sends it (`pkg/services/email.go`, through
//! gomail's dialer): SMTP to `host`:`port` from `from`, authenticated with `username`/`password` when a
//! username is set (`$key` references to the Secret), implicit TLS on port 465 and STARTTLS where the server
//! offers it elsewhere (`insecure_skip_verify` skips the certificate check), to the recipient's comma-separated
//! addresses; the template's `email.subject`, and `email.body` else the message, as text or, with `html`, as
//! HTML. Sent with `lettre`.

use std::time::Duration;

use lettre::message::header::ContentType;
use lettre::message::{Mailbox, Message};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::services::{options, text};

/// How long the SMTP conversation may take.
const SMTP_TIMEOUT: Duration = Duration::from_secs(30);

/// Go's gomail dials implicit TLS on this port only.
const SMTPS_PORT: u16 = 465;

#[derive(Deserialize)]
struct EmailOptions {
    #[serde(default)]
    host: String,
    #[serde(default)]
    port: u16,
    #[serde(default)]
    insecure_skip_verify: bool,
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    from: String,
    #[serde(default)]
    html: bool,
}

pub async fn send(
    options_value: &Value,
    notification: &Map<String, Value>,
    recipient: &str,
) -> Result<(), String> {
    let opts: EmailOptions = options("email", options_value)?;
    let message = message(&opts, notification, recipient)?;
    let tls = TlsParameters::builder(opts.host.clone())
        .dangerous_accept_invalid_certs(opts.insecure_skip_verify)
        .build_rustls()
        .map_err(|e| format!("email: TLS settings for {}: {e}", opts.host))?;
    let tls = if opts.port == SMTPS_PORT {
        Tls::Wrapper(tls)
    } else {
        Tls::Opportunistic(tls)
    };
    let mut transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&opts.host)
        .port(opts.port)
        .tls(tls)
        .timeout(Some(SMTP_TIMEOUT));
    if !opts.username.is_empty() {
        transport = transport.credentials(Credentials::new(opts.username, opts.password));
    }
    transport
        .build()
        .send(message)
        .await
        .map(|_| ())
        .map_err(|e| format!("email: sending to {recipient} through {}: {e}", opts.host))
}

/// The mail `email.go`'s `Send` makes: subject, body (the template's `email.body` else its message), to each
/// of the recipient's comma-separated addresses.
fn message(
    opts: &EmailOptions,
    notification: &Map<String, Value>,
    recipient: &str,
) -> Result<Message, String> {
    let mailbox = |address: &str| -> Result<Mailbox, String> {
        address
            .trim()
            .parse()
            .map_err(|e| format!("email: address {:?}: {e}", address.trim()))
    };
    let mut builder = Message::builder()
        .from(mailbox(&opts.from)?)
        .subject(text(notification, &["email", "subject"]));
    for address in recipient.split(',') {
        builder = builder.to(mailbox(address)?);
    }
    let body = match text(notification, &["email", "body"]) {
        body if body.is_empty() => text(notification, &["message"]),
        body => body,
    };
    let content_type = if opts.html {
        ContentType::TEXT_HTML
    } else {
        ContentType::TEXT_PLAIN
    };
    builder
        .header(content_type)
        .body(body)
        .map_err(|e| format!("email: {e}"))
}
