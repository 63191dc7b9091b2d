#!/usr/bin/env bash
# The test command: installs what the tests need, then runs format, lint and every test.
# Usage: tests/run.sh            (from anywhere; works on a fresh clone as root or with sudo)
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n== %s\n' "$*" >&2; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# Real Prometheus (prometheus + promtool) for the end-to-end tests, curl for the docs' runnable blocks, and tmux
# for `get rollout --watch` through a real terminal (docs/development.md, "Tests").
if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null || ! command -v curl >/dev/null \
  || ! command -v tmux >/dev/null; then
  log "installing Debian's prometheus, curl and tmux packages"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends prometheus curl tmux >/dev/null
  # The package starts a system service on some hosts; the tests start their own servers on free ports.
  as_root systemctl stop prometheus 2>/dev/null || true
fi
command -v promtool >/dev/null || { echo "promtool is still missing: install Debian's prometheus package" >&2; exit 1; }
command -v tmux >/dev/null || { echo "tmux is still missing: install Debian's tmux package (apt-get install -y tmux)" >&2; exit 1; }
# Headless Chromium and chromedriver: the offline reports (tests/cli/report.rs, e2e) and the dashboard (tests/web/).
command -v chromium >/dev/null && command -v chromedriver >/dev/null || { log "installing Debian's chromium and chromium-driver"; as_root apt-get update -qq; DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null; }

if ! command -v cargo-nextest >/dev/null && ! cargo nextest --version >/dev/null 2>&1; then
  log "installing cargo-nextest"
  cargo install --locked cargo-nextest
fi

log "cargo fmt --check"
cargo fmt --all -- --check

log "cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

# --- Helm chart checks (charts/canaryd, tests/chart/) -----------------------------------------------------
# Real Helm v4 through PyPI's helm-python-sdk and kubernetes-validate, in a git-ignored virtualenv; pip leaves
# pinned packages that are already there alone, so a second run installs nothing.
log "chart checks: Python packages"
if ! [ -x .venv/bin/python ]; then
  python3 -m venv .venv || { echo "python3 -m venv failed: install Debian's python3-venv package" >&2; exit 1; }
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r tests/chart/requirements.txt
log "chart checks"
cargo build --locked --quiet --bin canaryd
.venv/bin/python tests/chart/verify.py --canaryd "${CARGO_TARGET_DIR:-target}/debug/canaryd"
# --- end of Helm chart checks -----------------------------------------------------------------------------

log "tests"
cargo nextest run --workspace --locked --no-fail-fast
