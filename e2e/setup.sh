#!/usr/bin/env bash
# Installs what building and testing jobsd needs beyond a Rust toolchain, from Debian's
# packages. Idempotent: packages already present are not fetched again.
set -euo pipefail

# Debian packages the tests need (the list grows with the e2e suites).
# e2e/jobs_api.sh: python3 + python3-venv for the Dapr Python SDK's venv (`python3 -m venv`
# fails on Debian without python3-venv), curl for the health checks.
# The etcd store's tests and e2e/cluster.sh run Debian's etcd 3.4 (`/usr/bin/etcd`). The build
# itself needs no protoc: build.rs compiles every .proto (etcd's too) with protox.
# e2e/console.sh drives Debian's chromium headless (through Playwright from PyPI, whose own
# browser download is not used); fonts-dejavu-core gives its screenshots readable text.
# e2e/faults/tls.sh makes its certificates with openssl.
packages=(ca-certificates curl python3 python3-venv etcd-server chromium fonts-dejavu-core openssl)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi

# Debian's etcd-server package starts a system etcd on 2379; the tests start their own.
if command -v systemctl >/dev/null && systemctl is-active --quiet etcd 2>/dev/null; then
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" systemctl disable --now etcd || true
fi

command -v cargo >/dev/null || {
  echo "cargo not found: install Rust 1.90+ (https://rustup.rs) first" >&2
  exit 1
}
