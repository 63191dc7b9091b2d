//! A page file opened in headless Chromium (Debian's `chromium`, `/usr/bin/chromium`) with the network
//! cut off: every request goes to a proxy on a closed port and every host name fails to resolve, so a page
//! that needs anything beyond itself shows it missing. Chromium's own command line (`--dump-dom`,
//! `--screenshot`) needs no driver.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The browser the tests use; `tests/run.sh` installs it.
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// Bounds one browser run on a loaded machine.
const TIMEOUT_SECONDS: &str = "90";

fn chromium(page: &Path, action: &[String]) -> std::process::Output {
    let profile = tempfile::tempdir().expect("a temporary Chromium profile");
    let page = page.canonicalize().expect("the page exists");
    let mut args: Vec<String> = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--proxy-server=http://127.0.0.1:9",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--window-size=1200,2000",
    ]
    .map(String::from)
    .to_vec();
    args.push(format!("--user-data-dir={}", profile.path().display()));
    args.extend(action.iter().cloned());
    args.push(format!("file://{}", page.display()));
    let out = Command::new("timeout")
        .arg(TIMEOUT_SECONDS)
        .arg(CHROMIUM)
        .args(&args)
        .output()
        .expect("timeout and chromium run (tests/run.sh installs chromium)");
    assert!(
        out.status.success(),
        "chromium {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The page's DOM once Chromium has loaded it offline, serialized.
pub fn dump_dom(page: &Path) -> String {
    String::from_utf8_lossy(&chromium(page, &["--dump-dom".to_string()]).stdout).into_owned()
}

/// A screenshot of the page loaded offline, written to `png` (its folder is created).
pub fn screenshot(page: &Path, png: &Path) -> PathBuf {
    if let Some(dir) = png.parent() {
        std::fs::create_dir_all(dir).expect("the screenshot's folder");
    }
    chromium(page, &[format!("--screenshot={}", png.display())]);
    assert!(
        png.exists(),
        "chromium wrote no screenshot at {}",
        png.display()
    );
    png.to_path_buf()
}
