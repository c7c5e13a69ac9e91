#!/usr/bin/env bash
# Builds the real Dapr that jobsd is tested against, from Dapr's own Go modules at the versions
# pinned in e2e/dapr/versions.env, into a cache dir; what is already built is not built again.
#
#   bash e2e/dapr/build.sh            daprd, scheduler, placement at DAPR_VERSION, and the dapr CLI
#   bash e2e/dapr/build.sh --skew     also daprd, scheduler, placement at each of DAPR_SKEW_VERSIONS
#   bash e2e/dapr/build.sh --print    only print where the binaries are (after a build)
#   DAPR_BUILD_CLI=0 bash e2e/dapr/build.sh   without the CLI (CI needs none)
#
# Binaries land in $JOBSD_DAPR_CACHE (default ~/.cache/jobsd/dapr):
#   <cache>/<version>/{daprd,scheduler,placement}   <cache>/cli-<version>/dapr
#   <cache>/<skew version>/{daprd,scheduler,placement}   (--skew; DAPR_CACHE=<cache> printed too)
#
# `go install …/cmd/daprd@v…` refuses github.com/dapr/dapr (its go.mod has replace directives),
# so the module's source comes from `go mod download` and the build runs in a writable copy of it
# under the cache dir. None of Dapr's source is kept in this repository.
#
# daprd is built with one tag of our own, `jobsdsuite`, instead of Dapr's `stablecomponents`
# (some 140 components, most of the build's downloads and compile time): the copy's build
# constraints are widened so that the components the suites use come with it, and nothing else.
#   state.in-memory (actor state, most suites), state.sqlite (the workflow suites),
#   pubsub.in-memory (workflow and actor tests that publish), nameresolution.mdns (standalone
#   service invocation between sidecars).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions.env
. "$here/versions.env"

cache="${JOBSD_DAPR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/jobsd/dapr}"
mkdir -p "$cache"
# One build at a time per cache (suites, the SDK matrix and CI may all ask at once).
exec 9>"$cache/.lock"
flock 9
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:--buildvcs=false}"

skew=0 print=0
for a in "$@"; do
  case "$a" in
    --skew) skew=1 ;;
    --print) print=1 ;;
    *) echo "build.sh: unknown argument $a" >&2; exit 2 ;;
  esac
done

say() { printf 'dapr build: %s\n' "$*" >&2; }

command -v go >/dev/null || { say "go not found: the real Dapr is built with Go (1.26+)"; exit 1; }

# The writable copy of module $1@$2; prints its path.
source_copy() {
  local mod=$1 ver=$2 name
  name=$(basename "$mod")
  local dst="$cache/src/$name-$ver"
  if [ ! -f "$dst/.complete" ]; then
    local dir
    dir=$(go mod download -json "$mod@$ver" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
    [ -n "$dir" ] && [ -d "$dir" ] || { say "go mod download $mod@$ver gave no source dir"; exit 1; }
    rm -rf "$dst"
    mkdir -p "$(dirname "$dst")"
    cp -r "$dir" "$dst.tmp"
    chmod -R u+w "$dst.tmp"
    mv "$dst.tmp" "$dst"
    touch "$dst/.complete"
  fi
  printf '%s\n' "$dst"
}

# Widens the component build constraints of a dapr source copy for the `jobsdsuite` tag.
suite_components() {
  local comp=$1/cmd/daprd/components
  local f
  for f in state_in-memory.go state_sqlite.go pubsub_in-memory.go nameresolution_mdns.go; do
    [ -f "$comp/$f" ] || { say "$comp/$f not found: the component list changed in this Dapr version"; exit 1; }
    grep -q jobsdsuite "$comp/$f" || sed -i '1s#^//go:build \(.*\)$#//go:build \1 || jobsdsuite#' "$comp/$f"
  done
  grep -q jobsdsuite "$comp/zz_notag.go" ||
    sed -i '1s#^//go:build \(.*\)$#//go:build \1 \&\& !jobsdsuite#' "$comp/zz_notag.go"
}

# go build with a progress line; $1 = output binary, rest = go build args (run in $PWD).
build_one() {
  local out=$1; shift
  if [ -x "$out" ]; then return 0; fi
  local t0=$SECONDS
  say "building $(basename "$out") ($(basename "$(dirname "$out")")) ..."
  go build -trimpath -o "$out.tmp" "$@"
  mv "$out.tmp" "$out"
  say "built $out in $((SECONDS - t0)) s"
}

# The replaces of DAPR_REPLACE in the source copy $1 of DAPR_VERSION (`go mod edit -replace`; the
# copy's go.sum is completed by the Go command under -mod=mod, here and in suite.sh's suite
# build). Applied on every run, so the suite's build finds them even when the binaries are
# cached; the ones a copy was given before are recorded and dropped first, so that a changed
# DAPR_REPLACE does not leave an old one behind (binaries already built are not rebuilt).
dapr_replace() {
  local src=$1 replaces=$2 r
  if [ -f "$src/.jobsd-replace" ]; then
    for r in $(cat "$src/.jobsd-replace"); do
      (cd "$src" && go mod edit -dropreplace "${r%%=*}")
    done
  fi
  for r in $replaces; do
    (cd "$src" && go mod edit -replace "$r")
  done
  printf '%s\n' "$replaces" >"$src/.jobsd-replace"
}

# The replaces for Dapr version $1: DAPR_REPLACE for DAPR_VERSION, the `$1:`-prefixed entries of
# DAPR_SKEW_REPLACE for a skew version.
replaces_of() {
  local ver=$1 r
  if [ "$ver" = "$DAPR_VERSION" ]; then
    printf '%s\n' "${DAPR_REPLACE:-}"
    return
  fi
  for r in ${DAPR_SKEW_REPLACE:-}; do
    [ "${r%%:*}" != "$ver" ] || printf '%s\n' "${r#*:}"
  done
}

build_dapr() {
  local ver=$1; shift
  local out="$cache/$ver" need=0 b
  local src= replaces
  replaces=$(replaces_of "$ver")
  if [ "$ver" = "$DAPR_VERSION" ] || [ -n "$replaces" ]; then
    src=$(source_copy github.com/dapr/dapr "$ver")
    dapr_replace "$src" "$replaces"
  fi
  for b in "$@"; do [ -x "$out/$b" ] || need=1; done
  [ "$need" = 1 ] || return 0
  mkdir -p "$out"
  [ -n "$src" ] || src=$(source_copy github.com/dapr/dapr "$ver")
  suite_components "$src"
  local mod=()
  [ -z "$replaces" ] || mod=(-mod=mod)
  (
    cd "$src"
    for b in "$@"; do
      if [ "$b" = daprd ]; then
        build_one "$out/daprd" "${mod[@]}" -tags=jobsdsuite ./cmd/daprd
      else
        build_one "$out/$b" "${mod[@]}" "./cmd/$b"
      fi
    done
  )
}

build_cli() {
  local ver=$1 out="$cache/cli-$1"
  [ -x "$out/dapr" ] && return 0
  mkdir -p "$out"
  local src
  src=$(source_copy github.com/dapr/cli "$ver")
  (
    cd "$src"
    local r
    for r in ${DAPR_CLI_REPLACE:-}; do
      go mod edit -replace "$r"
    done
    GOFLAGS="$GOFLAGS -mod=mod" build_one "$out/dapr" .
  )
}

if [ "$print" = 0 ]; then
  build_dapr "$DAPR_VERSION" scheduler placement daprd
  [ "${DAPR_BUILD_CLI:-1}" = 0 ] || build_cli "$DAPR_CLI_VERSION"
  if [ "$skew" = 1 ]; then
    for v in $DAPR_SKEW_VERSIONS; do build_dapr "$v" daprd scheduler placement; done
  fi
fi

echo "DAPR_BIN_DIR=$cache/$DAPR_VERSION"
echo "DAPR_CACHE=$cache"
echo "DAPR_CLI=$cache/cli-$DAPR_CLI_VERSION/dapr"
