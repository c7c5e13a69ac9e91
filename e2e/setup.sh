#!/usr/bin/env bash
# Installs what building and testing jobsd needs beyond a Rust toolchain, from Debian's
# packages. Idempotent: packages already present are not fetched again.
set -euo pipefail

# Debian packages the tests need (the list grows with the e2e suites).
# e2e/jobs_api.sh: python3 + python3-venv for the Dapr Python SDK's venv (`python3 -m venv`
# fails on Debian without python3-venv), curl for the health checks.
packages=(ca-certificates curl python3 python3-venv)

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

command -v cargo >/dev/null || {
  echo "cargo not found: install Rust 1.90+ (https://rustup.rs) first" >&2
  exit 1
}
