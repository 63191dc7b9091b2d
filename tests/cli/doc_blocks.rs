//! The runnable shell blocks of README.md and docs/*.md: every fenced block whose info string is
//! `sh runnable` runs with `bash -e` in its own scratch folder that holds the repository's top-level files
//! (as a fresh clone would), with the built `canaryd` first on the `PATH`, so a command the docs show cannot
//! stop working unnoticed. Whatever a block starts in the background (a Prometheus) is stopped when it ends.

#![allow(clippy::disallowed_methods)] // Not the Clock: the blocks run real processes on real time.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::CANARYD;

/// The info string that marks a block as runnable (docs/development.md, "Tests").
const MARKER: &str = "```sh runnable";

/// How long one block may run before it counts as hung.
const BLOCK_TIMEOUT: Duration = Duration::from_secs(120);

/// One marked block: where it starts and its text.
struct Block {
    origin: String,
    script: String,
}

/// The marked blocks of one Markdown file, `origin` naming the fence's line (`docs/cli.md:137`).
fn runnable_blocks(relative: &str, markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for (index, line) in markdown.lines().enumerate() {
        match open.as_mut() {
            None if line.trim_end() == MARKER => {
                open = Some(Block {
                    origin: format!("{relative}:{}", index + 1),
                    script: String::new(),
                })
            }
            None => {}
            Some(_) if line.trim_end() == "```" => blocks.extend(open.take()),
            Some(block) => {
                block.script.push_str(line);
                block.script.push('\n');
            }
        }
    }
    assert!(
        open.is_none(),
        "{relative}: a runnable block is never closed"
    );
    blocks
}

/// README.md and every docs/*.md, as paths relative to the repository root.
fn documents(root: &Path) -> Vec<String> {
    let mut docs: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ is readable")
        .map(|entry| {
            entry
                .expect("a docs/ entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    docs.insert(0, "README.md".to_owned());
    docs
}

/// A scratch folder standing in for a fresh clone: a link to each of the repository's top-level entries
/// (hidden ones and the build folder left out), so blocks read the repository's files and write their own.
fn scratch_clone(root: &Path) -> tempfile::TempDir {
    let scratch = tempfile::tempdir().expect("a scratch folder");
    for entry in std::fs::read_dir(root).expect("the repository root is readable") {
        let name = entry.expect("a top-level entry").file_name();
        let shown = name.to_string_lossy();
        if shown.starts_with('.') || shown == "target" {
            continue;
        }
        std::os::unix::fs::symlink(root.join(&name), scratch.path().join(&name))
            .expect("link a top-level entry into the scratch folder");
    }
    scratch
}

/// Sends SIGTERM to every process of the group `group` and waits until none is left.
fn stop_group(group: u32) {
    let signal = |args: &[&str]| {
        Command::new("kill")
            .args(args)
            .arg(format!("-{group}"))
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    };
    signal(&["-TERM", "--"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while signal(&["-0", "--"]) {
        if Instant::now() > deadline {
            signal(&["-KILL", "--"]);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs one block; `Err` says how it failed, with the end of its output.
fn run(block: &Block, root: &Path, bin_dir: &Path) -> Result<(), String> {
    let scratch = scratch_clone(root);
    let stdout_path = scratch.path().join(".block-stdout");
    let stderr_path = scratch.path().join(".block-stderr");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![bin_dir.to_path_buf()];
    paths.extend(std::env::split_paths(&path));
    // The output goes to files, not pipes: a background process keeps a pipe open after the block ends.
    let mut child = Command::new("bash")
        .args(["-e", "-c", &block.script])
        .current_dir(scratch.path())
        .env("PATH", std::env::join_paths(paths).expect("a PATH"))
        .stdin(Stdio::null())
        .stdout(File::create(&stdout_path).expect("the stdout file"))
        .stderr(File::create(&stderr_path).expect("the stderr file"))
        .process_group(0)
        .spawn()
        .expect("bash starts");
    let deadline = Instant::now() + BLOCK_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for bash") {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    stop_group(child.id());
    let _ = child.wait();
    let verdict = match status {
        Some(status) if status.success() => return Ok(()),
        Some(status) => format!("ended with {status}"),
        None => format!("still running after {BLOCK_TIMEOUT:?}"),
    };
    let tail = |path: &PathBuf| {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    };
    Err(format!(
        "{}: the block {verdict}\n--- block\n{}--- stdout (end)\n{}\n--- stderr (end)\n{}",
        block.origin,
        block.script,
        tail(&stdout_path),
        tail(&stderr_path)
    ))
}

#[test]
fn the_runnable_blocks_of_the_readme_and_docs_run_as_written() {
    let root = canaryd_testkit::repo_root();
    let bin_dir = CANARYD
        .executable()
        .parent()
        .expect("the binary lies in a folder");
    let mut blocks = Vec::new();
    for relative in documents(root) {
        let markdown =
            std::fs::read_to_string(root.join(&relative)).expect("the document is readable");
        blocks.extend(runnable_blocks(&relative, &markdown));
    }
    assert!(
        blocks
            .iter()
            .any(|block| block.origin.starts_with("README.md:")),
        "the README has no runnable block"
    );
    // One after another: several blocks start a Prometheus on the same port.
    let failures: Vec<String> = blocks
        .iter()
        .filter_map(|block| run(block, root, bin_dir).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_marked_block_is_found_and_an_unmarked_one_is_not() {
    let markdown = "text\n```sh\nnot this\n```\n```sh runnable\necho one\necho two\n```\n";
    let blocks = runnable_blocks("doc.md", markdown);
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].origin, "doc.md:5");
    assert_eq!(blocks[0].script, "echo one\necho two\n");
}
