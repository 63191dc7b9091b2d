//! A real browser for the dashboard's tests: Debian's headless Chromium (`/usr/bin/chromium`, flags
//! `--headless --no-sandbox --disable-gpu --disable-background-networking`) driven through Debian's
//! `chromedriver` over the W3C WebDriver protocol (plain HTTP and JSON, so no browser is downloaded and no
//! client crate is needed). TEST FIXTURE ONLY: it loads, finds, clicks and photographs; the tests judge.

#![allow(clippy::disallowed_methods)] // Not the Clock: the browser runs on real time.

use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

/// Where Debian's packages put them; `tests/run.sh` installs both.
pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// The flags the issue fixes for every headless run.
const FLAGS: [&str; 4] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
];

/// The WebDriver name of an element in its JSON.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// How long the driver waits for an element before it says there is none.
const IMPLICIT_WAIT_MS: u64 = 0;

/// A headless Chromium session; the driver and the browser end when it is dropped.
pub struct Browser {
    driver: Child,
    base: String,
    http: reqwest::Client,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver on a free port and a Chromium session through it.
    pub async fn start() -> Browser {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        // A process group of its own, so that the browser it starts ends with it whatever ends the test.
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(
                "chromedriver runs (Debian's chromium-driver package; tests/run.sh installs it)",
            );
        let profile = tempfile::tempdir().expect("a profile directory");
        let mut browser = Browser {
            driver,
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
            _profile: profile,
        };
        browser.wait_for_driver().await;
        let mut args: Vec<String> = FLAGS.iter().map(|f| f.to_string()).collect();
        args.push("--window-size=1280,1000".to_string());
        args.push(format!(
            "--user-data-dir={}",
            browser._profile.path().display()
        ));
        let session = browser
            .call(
                "POST",
                "/session",
                json!({"capabilities": {"alwaysMatch": {
                    "browserName": "chrome",
                    "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
                }}}),
            )
            .await;
        let id = session["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("a session: {session}"));
        browser.base = format!("{}/session/{id}", browser.base);
        browser
            .call("POST", "/timeouts", json!({"implicit": IMPLICIT_WAIT_MS}))
            .await;
        browser
    }

    async fn wait_for_driver(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(answer) = self.http.get(format!("{}/status", self.base)).send().await
                && answer.status().is_success()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("chromedriver did not answer on {} within 20 s", self.base);
    }

    /// One WebDriver command; its `value`. Panics on an HTTP error, with the driver's message.
    async fn call(&self, method: &str, path: &str, body: Value) -> Value {
        match self.try_call(method, path, body).await {
            Ok(value) => value,
            Err(e) => panic!("WebDriver {method} {path}: {e}"),
        }
    }

    async fn try_call(&self, method: &str, path: &str, body: Value) -> Result<Value, String> {
        let url = format!("{}{path}", self.base);
        let request = match method {
            "GET" => self.http.get(url),
            "DELETE" => self.http.delete(url),
            _ => self
                .http
                .post(url)
                .header("content-type", "application/json")
                .body(body.to_string()),
        };
        let answer = request.send().await.map_err(|e| e.to_string())?;
        let ok = answer.status().is_success();
        let text = answer.text().await.map_err(|e| e.to_string())?;
        let value: Value = serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
        match ok {
            true => Ok(value["value"].clone()),
            false => Err(value["value"].to_string()),
        }
    }

    /// Loads `url` and waits for it.
    pub async fn open(&self, url: &str) {
        self.call("POST", "/url", json!({"url": url})).await;
    }

    /// The elements `css` finds, as WebDriver ids.
    async fn find_all(&self, css: &str) -> Vec<String> {
        let found = self
            .call(
                "POST",
                "/elements",
                json!({"using": "css selector", "value": css}),
            )
            .await;
        found
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e[ELEMENT].as_str().map(str::to_string))
            .collect()
    }

    /// How many elements `css` finds.
    pub async fn count(&self, css: &str) -> usize {
        self.texts(css).await.len()
    }

    /// The visible text of each element `css` finds, read at one instant (a live page may swap its content
    /// between two WebDriver commands).
    pub async fn texts(&self, css: &str) -> Vec<String> {
        let texts = self
            .call(
                "POST",
                "/execute/sync",
                json!({
                    "script": "return [...document.querySelectorAll(arguments[0])].map(e => e.innerText)",
                    "args": [css],
                }),
            )
            .await;
        texts
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| t.as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// The text of the first element `css` finds, waiting up to `patience` until it contains `wanted`;
    /// panics with what it last was.
    pub async fn wait_for_text(&self, css: &str, wanted: &str, patience: Duration) -> String {
        let deadline = Instant::now() + patience;
        loop {
            let seen = self.texts(css).await.into_iter().next().unwrap_or_default();
            if seen.contains(wanted) {
                return seen;
            }
            if Instant::now() > deadline {
                panic!("{css} did not come to say {wanted:?} within {patience:?}: {seen:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Clicks the first element `css` finds, as a person would (the click goes through the browser's input);
    /// finds it again if the page swapped it out in between.
    pub async fn click(&self, css: &str) {
        let mut last = String::new();
        for _ in 0..10 {
            let Some(id) = self.find_all(css).await.into_iter().next() else {
                last = format!("nothing to click at {css}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            match self
                .try_call("POST", &format!("/element/{id}/click"), json!({}))
                .await
            {
                Ok(_) => return,
                Err(e) => last = e,
            }
        }
        panic!("cannot click {css}: {last}");
    }

    /// Accepts the dialog a page opened (`confirm`), waiting up to 5 s for it.
    pub async fn accept_dialog(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while let Err(e) = self.try_call("POST", "/alert/accept", json!({})).await {
            if Instant::now() > deadline {
                panic!("no dialog to accept: {e}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Runs `script` in the page (a function body; `return` gives the value).
    pub async fn script(&self, script: &str) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            json!({"script": script, "args": []}),
        )
        .await
    }

    /// A PNG of the window, written to `path` (its directory created).
    pub async fn screenshot(&self, path: &Path) {
        let encoded = self.call("GET", "/screenshot", Value::Null).await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(encoded.as_str().unwrap_or_default())
            .expect("a base64 PNG");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("the screenshots' directory");
        }
        std::fs::write(path, png).expect("the screenshot written");
    }
}

impl Drop for Browser {
    /// Ends chromedriver and the browser it started: its process group, by its id.
    fn drop(&mut self) {
        let group = format!("-{}", self.driver.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.driver.wait();
    }
}
