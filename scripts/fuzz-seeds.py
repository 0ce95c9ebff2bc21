#!/usr/bin/env python3
"""Seeds the YAML fuzz corpora from Istio's test inputs (../shared/istio-testdata beside the repository).

  fuzz/corpus/yaml_config/<sha1>  small YAML/JSON config files (valid and invalid), whole
  fuzz/corpus/validate/<sha1>     one document each, prefixed by its kind's byte (index in api Kind::ALL)

Deterministic (sorted paths, fixed limits); files are named by the SHA-1 of their content as cargo-fuzz
names corpus entries, so re-running adds nothing new. The ADS and node-id seeds are written by
`cargo test -p meshpilot-fuzzing --test it seeds:: -- --ignored` instead (they are protobuf).
"""
import hashlib
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTDATA = os.path.join(ROOT, "..", "shared", "istio-testdata")
CORPUS = os.path.join(ROOT, "fuzz", "corpus")

# Order of api::schema::Kind::ALL (crates/api/src/schema.rs); the validate target picks Kind::ALL[b % 15].
KINDS = [
    "VirtualService", "Gateway", "ServiceEntry", "WorkloadEntry", "WorkloadGroup", "DestinationRule",
    "EnvoyFilter", "Sidecar", "ProxyConfig", "AuthorizationPolicy", "RequestAuthentication",
    "PeerAuthentication", "Telemetry", "WasmPlugin", "TrafficExtension",
]
MAX_FILES = 180
MAX_FILE_BYTES = 4000
PER_KIND = 12
MAX_DOC_BYTES = 3000


def priority(rel):
    """Validation inputs first (they hold the invalid cases), then samples, then the rest."""
    for i, prefix in enumerate([
        "pkg/config/validation/", "_derived/validation/", "tests/testdata/config/",
        "pkg/test/datasets/validation/", "samples/",
    ]):
        if rel.startswith(prefix):
            return i
    return 9


def inputs():
    out = []
    for dirpath, dirnames, filenames in os.walk(TESTDATA):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith((".yaml", ".yml", ".json")):
                path = os.path.join(dirpath, name)
                out.append((priority(os.path.relpath(path, TESTDATA)), os.path.relpath(path, TESTDATA), path))
    return sorted(out)


def write(target, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, hashlib.sha1(data).hexdigest())
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(data)
        return 1
    return 0


def main():
    if not os.path.isdir(TESTDATA):
        sys.exit(f"no Istio test data at {TESTDATA}")
    files = inputs()
    n = 0
    for _, _, path in files:
        data = open(path, "rb").read()
        if len(data) <= MAX_FILE_BYTES and n < MAX_FILES:
            n += write("yaml_config", data)
    per_kind = {k: 0 for k in KINDS}
    m = 0
    for _, _, path in files:
        if path.endswith(".json"):
            continue
        text = open(path, "rb").read().decode("utf-8", "replace")
        for doc in re.split(r"^---\s*$", text, flags=re.M):
            kind = re.search(r"^kind:\s*(\w+)\s*$", doc, flags=re.M)
            if not kind or kind.group(1) not in per_kind:
                continue
            k = kind.group(1)
            body = doc.strip().encode()
            if len(body) > MAX_DOC_BYTES or per_kind[k] >= PER_KIND:
                continue
            added = write("validate", bytes([KINDS.index(k)]) + body)
            per_kind[k] += added
            m += added
    print(f"yaml_config: {n} new, validate: {m} new ({per_kind})")


main()
