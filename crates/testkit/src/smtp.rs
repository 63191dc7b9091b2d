//! A small SMTP server for the email notification service's tests: it answers a client's EHLO (offering
//! `AUTH PLAIN`, no STARTTLS), AUTH, MAIL, RCPT, DATA, RSET and QUIT on 127.0.0.1, and records each mail that
//! arrives (the envelope, the credentials it was given and the message as sent). Nothing else of SMTP.

use std::sync::{Arc, Mutex};

use base64::Engine;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// One mail as it arrived.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mail {
    /// `user:password` from `AUTH PLAIN`, when the client authenticated.
    pub login: Option<String>,
    pub from: String,
    pub to: Vec<String>,
    /// The message (headers and body) as the client sent it after DATA, lines joined by `\r\n`.
    pub data: String,
}

/// The running server; it stops with the test's runtime.
pub struct SmtpServer {
    pub port: u16,
    mails: Arc<Mutex<Vec<Mail>>>,
}

impl SmtpServer {
    pub async fn start() -> SmtpServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port for the SMTP server");
        let port = listener.local_addr().expect("its address").port();
        let mails = Arc::new(Mutex::new(Vec::new()));
        let recorded = mails.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(session(stream, recorded.clone()));
            }
        });
        SmtpServer { port, mails }
    }

    /// The mails received so far.
    pub fn mails(&self) -> Vec<Mail> {
        self.mails.lock().expect("not poisoned").clone()
    }
}

/// The address inside `<...>` of `MAIL FROM:<a>` / `RCPT TO:<a>`.
fn address(argument: &str) -> String {
    let inner = argument.split_once('<').map_or(argument, |(_, rest)| rest);
    inner.split('>').next().unwrap_or("").to_string()
}

async fn session(stream: TcpStream, mails: Arc<Mutex<Vec<Mail>>>) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let mut mail = Mail::default();
    let _ = write.write_all(b"220 canaryd-test ESMTP\r\n").await;
    while let Ok(Some(line)) = lines.next_line().await {
        let upper = line.to_ascii_uppercase();
        let reply: &[u8] = if upper.starts_with("EHLO") || upper.starts_with("HELO") {
            b"250-canaryd-test\r\n250 AUTH PLAIN\r\n"
        } else if let Some(token) = upper.strip_prefix("AUTH PLAIN ").map(|_| &line[11..]) {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(token.trim())
                .unwrap_or_default();
            let parts: Vec<String> = decoded
                .split(|b| *b == 0)
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect();
            mail.login = Some(parts[1..].join(":"));
            b"235 2.7.0 Authentication successful\r\n"
        } else if upper.starts_with("MAIL FROM:") {
            mail.from = address(&line[10..]);
            b"250 OK\r\n"
        } else if upper.starts_with("RCPT TO:") {
            mail.to.push(address(&line[8..]));
            b"250 OK\r\n"
        } else if upper == "DATA" {
            let _ = write
                .write_all(b"354 End data with <CR><LF>.<CR><LF>\r\n")
                .await;
            let mut data = Vec::new();
            while let Ok(Some(l)) = lines.next_line().await {
                if l == "." {
                    break;
                }
                data.push(l);
            }
            mail.data = data.join("\r\n");
            let done = std::mem::take(&mut mail);
            mail.login = done.login.clone();
            mails.lock().expect("not poisoned").push(done);
            b"250 OK: queued\r\n"
        } else if upper == "RSET" || upper == "NOOP" {
            b"250 OK\r\n"
        } else if upper == "QUIT" {
            let _ = write.write_all(b"221 Bye\r\n").await;
            return;
        } else {
            b"502 Command not implemented\r\n"
        };
        if write.write_all(reply).await.is_err() {
            return;
        }
    }
}
