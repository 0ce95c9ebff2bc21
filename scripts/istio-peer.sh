#!/usr/bin/env bash
# Real Istio binaries (istiod = pilot-discovery, pilot-agent, istioctl) as peers and oracles for meshpilot's
# tests (docs/PILOT-AGENT.md; facts in ../shared/design/ISTIOD-PEER.md), and helm, which renders Istio's own
# charts (docs/INSTALL.md).
#
#   scripts/istio-peer.sh build     go install pilot-discovery, pilot-agent and istioctl at one pinned version of
#                                   istio.io/istio from the Go module proxy into the cache, in one
#                                   `go install`; a no-op when both binaries are there. Prints the time.
#                                   Also copies Istio's default Envoy bootstrap template of that version
#                                   (tools/packaging/common/envoy_bootstrap.json in the module; the
#                                   istio-proxy image has it at ./var/lib/istio/envoy/envoy_bootstrap_tmpl.json,
#                                   pilot-agent does not embed it) from the module cache into the cache.
#                                   Also builds helm (helm.sh/helm/v4, HELM_VERSION below) into the same
#                                   directory; a no-op when it is there.
#   scripts/istio-peer.sh bin-dir   print the directory with the binaries.
#   scripts/istio-peer.sh helm-path print the path of the helm binary (built by `build`).
#   scripts/istio-peer.sh template  print the path of that bootstrap template.
#   scripts/istio-peer.sh module-dir print the directory of the istio.io/istio module of that version (its
#                                   test data and charts), downloading it into Go's module cache if needed.
#
# Environment: MESHPILOT_CACHE (default ~/.cache/meshpilot), ISTIO_PEER_VERSION (the pseudo-version of
# istio.io/istio; default below), GOFLAGS/GOPROXY as usual for Go.
set -euo pipefail

ISTIO_VERSION="${ISTIO_PEER_VERSION:-v0.0.0-20260827124520-eed52ebb66ad}"
HELM_VERSION=v4.3.2
CACHE="${MESHPILOT_CACHE:-$HOME/.cache/meshpilot}/istio/$ISTIO_VERSION"
BIN="$CACHE/bin"
TEMPLATE="$CACHE/envoy_bootstrap_tmpl.json"
# Named by its version: a change of HELM_VERSION builds the new one beside the old.
HELM="$BIN/helm-$HELM_VERSION"

log() { echo "istio-peer: $*" >&2; }
die() {
  echo "istio-peer: error: $*" >&2
  exit 1
}

module_dir() {
  go mod download -json "istio.io/istio@$ISTIO_VERSION" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p'
}

copy_template() {
  [ -f "$TEMPLATE" ] && return 0
  local dir
  dir="$(module_dir)"
  [ -f "$dir/tools/packaging/common/envoy_bootstrap.json" ] || die "no bootstrap template in istio.io/istio@$ISTIO_VERSION"
  cp "$dir/tools/packaging/common/envoy_bootstrap.json" "$TEMPLATE"
  chmod 0644 "$TEMPLATE"
}

# helm from the Go module proxy, in its own `go install` (its k8s.io modules differ from Istio's).
build_helm() {
  [ -x "$HELM" ] && return 0
  command -v go >/dev/null || die "go is not installed (needed to build helm)"
  mkdir -p "$BIN"
  local t0=$SECONDS tmp
  tmp="$(mktemp -d)"
  log "building helm $HELM_VERSION into $BIN"
  GOBIN="$tmp" go install -trimpath -ldflags='-s -w' "helm.sh/helm/v4/cmd/helm@$HELM_VERSION" || {
    rm -rf "$tmp"
    die "go install of helm.sh/helm/v4/cmd/helm@$HELM_VERSION failed"
  }
  mv "$tmp/helm" "$HELM"
  rm -rf "$tmp"
  log "helm built in $((SECONDS - t0)) s"
}

build() {
  build_helm
  if [ -x "$BIN/pilot-discovery" ] && [ -x "$BIN/pilot-agent" ] && [ -x "$BIN/istioctl" ]; then
    copy_template
    log "pilot-discovery, pilot-agent and istioctl $ISTIO_VERSION already in $BIN"
    return 0
  fi
  command -v go >/dev/null || die "go is not installed (needed to build pilot-discovery and pilot-agent)"
  mkdir -p "$BIN"
  local t0=$SECONDS
  log "building pilot-discovery, pilot-agent and istioctl $ISTIO_VERSION into $BIN"
  # The packages at the same module version in one command: they share the module download and most
  # of the build cache.
  GOBIN="$BIN" go install -trimpath -ldflags='-s -w' \
    "istio.io/istio/pilot/cmd/pilot-discovery@$ISTIO_VERSION" \
    "istio.io/istio/pilot/cmd/pilot-agent@$ISTIO_VERSION" \
    "istio.io/istio/istioctl/cmd/istioctl@$ISTIO_VERSION" ||
    die "go install of istio.io/istio@$ISTIO_VERSION failed"
  [ -x "$BIN/pilot-discovery" ] && [ -x "$BIN/pilot-agent" ] && [ -x "$BIN/istioctl" ] ||
    die "go install left no binaries in $BIN"
  copy_template
  log "built in $((SECONDS - t0)) s"
}

case "${1:-}" in
build) build ;;
bin-dir) echo "$BIN" ;;
helm-path) echo "$HELM" ;;
template) echo "$TEMPLATE" ;;
module-dir) module_dir ;;
*) die "usage: $0 build | bin-dir | helm-path | template | module-dir" ;;
esac
