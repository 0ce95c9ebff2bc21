#!/usr/bin/env python3
"""Differential check of `meshpilot analyze` / `meshpilot validate` against the real istioctl.

Runs, on every analyzer and validation input of the pinned istio.io/istio module
(pkg/config/analysis/analyzers/testdata/**, pkg/config/validation/testdata/**, samples/**, tests/**;
.yaml and .yml files), both

    istioctl analyze --use-kube=false -A -o json FILE     meshpilot analyze --use-kube=false -A -o json FILE
    istioctl validate -f FILE                             meshpilot validate -f FILE -o json

and compares, per file:
  analyze   the exit status, whether a document could not be parsed ("Error(s) adding files") and the
            set of (code, origin) of the messages, origin being istioctl's "Kind namespace/name";
  validate  the verdict (exit status 0 or not) and the sets of objects with errors and with warnings
            ("Kind/name": istioctl leaves the namespace of objects without one empty, meshpilot fills
            in `default`; a finding not about one object counts as "<file>", a crash as "<exit N>").

Prints one block per differing file with both sides, then `files: N agreeing: A differing: D`; exits 1
when any file differs (2 on a usage error). docs/ANALYZE.md lists the known differences with their reason.

    scripts/analyze-diff.py                   # the whole corpus
    scripts/analyze-diff.py --subset          # the fixed CI subset (SUBSET below)
    scripts/analyze-diff.py samples/bookinfo  # files or directories, relative to the module or absolute

Binaries: --meshpilot (default $CARGO_TARGET_DIR/debug/meshpilot, else target/debug/meshpilot),
--istioctl (default `scripts/istio-peer.sh bin-dir`/istioctl), --module (default
`scripts/istio-peer.sh module-dir`).
"""

import argparse
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CORPUS = [
    "pkg/config/analysis/analyzers/testdata",
    "pkg/config/validation/testdata",
    "samples",
    "tests",
]

# The CI subset (crates/meshpilot/tests/it/peer/analyze_diff.rs): files relative to the module, chosen to
# cover each analyzer family, schema errors and warnings, EnvoyFilter warnings, Gateway API binding and
# parse errors. Every one must agree.
SUBSET = [
    "pkg/config/analysis/analyzers/testdata/absolute-envoy-filter-operation.yaml",
    "pkg/config/analysis/analyzers/testdata/relative-envoy-filter-operation.yaml",
    "pkg/config/analysis/analyzers/testdata/envoy-filter-add-operation.yaml",
    "pkg/config/analysis/analyzers/testdata/authorizationpolicies.yaml",
    "pkg/config/analysis/analyzers/testdata/conflicting-gateways.yaml",
    "pkg/config/analysis/analyzers/testdata/deprecation.yaml",
    "pkg/config/analysis/analyzers/testdata/destinationrule-simple-destination.yaml",
    "pkg/config/analysis/analyzers/testdata/gateway-custom-ingressgateway.yaml",
    "pkg/config/analysis/analyzers/testdata/gateway-duplicate-certificate.yaml",
    "pkg/config/analysis/analyzers/testdata/gateway-secrets.yaml",
    "pkg/config/analysis/analyzers/testdata/misannotated.yaml",
    "pkg/config/analysis/analyzers/testdata/serviceentry-missing-addresses-protocol.yaml",
    "pkg/config/analysis/analyzers/testdata/sidecar-selector.yaml",
    "pkg/config/analysis/analyzers/testdata/telemetry-invalid-provider.yaml",
    "pkg/config/analysis/analyzers/testdata/common/meshconfig.yaml",
    "pkg/config/analysis/analyzers/testdata/virtualservice_conflictingmeshgatewayhosts.yaml",
    "pkg/config/analysis/analyzers/testdata/virtualservice_destinationhosts.yaml",
    "pkg/config/analysis/analyzers/testdata/virtualservice_destinationrules.yaml",
    "pkg/config/analysis/analyzers/testdata/virtualservice_gateways.yaml",
    "pkg/config/analysis/analyzers/testdata/virtualservice_jwtclaimroute.yaml",
    "pkg/config/analysis/analyzers/testdata/webhook.yaml",
    "pkg/config/analysis/analyzers/testdata/k8sgateway-selector.yaml",
    "pkg/config/validation/testdata/crds/authz-invalid.yaml",
    "pkg/config/validation/testdata/crds/telemetry-invalid.yaml",
    "pkg/config/validation/testdata/crds/envoyfilter-valid.yaml",
    "pkg/config/validation/testdata/crds/reqauth-valid.yaml",
    "pkg/config/validation/testdata/crds/peerauth-invalid.yaml",
    "samples/bookinfo/networking/bookinfo-gateway.yaml",
    "samples/bookinfo/networking/destination-rule-all-mtls.yaml",
    "samples/bookinfo/platform/kube/bookinfo.yaml",
    "samples/httpbin/httpbin-gateway.yaml",
    "samples/sleep/sleep.yaml",
    "tests/integration/pilot/testdata/a.yaml",
    "tests/integration/pilot/testdata/invalid.yaml",
    "tests/testdata/config/destination-rule-all.yaml",
    "tests/testdata/config/rule-websocket-route.yaml",
    "tests/testdata/networking/ingress-gateway/configs.yaml",
    "tests/integration/telemetry/policy/testdata/enable_envoy_local_ratelimit_per_route.yaml",
]


def peer_script(command):
    out = subprocess.run(
        [os.path.join(ROOT, "scripts/istio-peer.sh"), command], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        sys.exit(f"analyze-diff: scripts/istio-peer.sh {command} failed: {out.stderr.strip()}")
    return out.stdout.strip()


def corpus_files(module, paths):
    files = []
    for p in paths:
        full = p if os.path.isabs(p) else os.path.join(module, p)
        if os.path.isfile(full):
            files.append(full)
            continue
        if not os.path.isdir(full):
            sys.exit(f"analyze-diff: no file or directory {full}")
        for dirpath, _, names in os.walk(full):
            files.extend(os.path.join(dirpath, n) for n in names if n.endswith((".yaml", ".yml")))
    return sorted(set(files))


def run(argv):
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    except subprocess.TimeoutExpired:
        return 124, "", "timed out"
    return out.returncode, out.stdout, out.stderr


def analyze(binary, path):
    """(exit status, whether a document could not be parsed, sorted [(code, origin)]) and the output."""
    rc, out, err = run([binary, "analyze", "--use-kube=false", "-A", "-o", "json", path])
    messages = []
    # istioctl logs `warn file error processing …` lines on stdout before the JSON.
    start = 0 if out.startswith("[") else out.find("\n[") + 1
    try:
        messages = sorted({(m["code"], m["origin"]) for m in json.loads(out[start:])})
    except (ValueError, TypeError, KeyError):
        pass
    return (rc, "Error(s) adding files" in err, messages), out + err


ISTIOCTL_FINDING = re.compile(r"^\t\* ([A-Za-z]+)/([^/\s]*)/([^:\s]+): ")


def validate_istioctl(binary, path):
    """(invalid, objects with errors, objects with warnings) and the raw output. istioctl prints a
    `"FILE" has warnings:` block and an `Error: N errors occurred:` block of `\t* Kind/ns/name: why` lines;
    an error not about one object (or a crash) counts as "<file>"."""
    rc, out, err = run([binary, "validate", "-f", path])
    errors, warnings, section = set(), set(), None
    for line in (out + err).splitlines():
        if line.endswith(" has warnings: ") or line.endswith(" has warnings:"):
            section = warnings
        elif line.startswith("Error: "):
            section = errors
        elif line.startswith("\t* ") and section is not None:
            m = ISTIOCTL_FINDING.match(line)
            section.add(f"{m.group(1)}/{m.group(3)}" if m else "<file>")
    if rc != 0 and not errors:
        errors.add("<file>" if rc == 1 else f"<exit {rc}>")
    return (rc != 0, sorted(errors), sorted(warnings)), out + err


def validate_meshpilot(binary, path):
    """As validate_istioctl, from `meshpilot validate -o json`."""
    rc, out, err = run([binary, "validate", "-f", path, "-o", "json"])
    errors, warnings = set(), set()
    try:
        for rec in json.loads(out):
            name = f"{rec['kind']}/{rec['name']}" if rec["kind"] else "<file>"
            if not rec["valid"]:
                errors.add(name)
            if rec["warnings"]:
                warnings.add(name)
    except (ValueError, TypeError, KeyError):
        errors.add("<file>")
    if rc != 0 and not errors:
        errors.add("<file>" if rc == 1 else f"<exit {rc}>")
    return (rc != 0, sorted(errors), sorted(warnings)), out + err


def compare(args, path):
    """A list of (check, istioctl result, meshpilot result, istioctl output, meshpilot output)."""
    diffs = []
    (ia, ia_out), (ma, ma_out) = analyze(args.istioctl, path), analyze(args.meshpilot, path)
    if ia != ma:
        diffs.append(("analyze", ia, ma, ia_out, ma_out))
    (iv, iv_out), (mv, mv_out) = validate_istioctl(args.istioctl, path), validate_meshpilot(args.meshpilot, path)
    if iv != mv:
        diffs.append(("validate", iv, mv, iv_out, mv_out))
    return diffs


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", help="files or directories (relative to the module or absolute)")
    parser.add_argument("--subset", action="store_true", help="the fixed CI subset")
    parser.add_argument("--meshpilot")
    parser.add_argument("--istioctl")
    parser.add_argument("--module")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--brief", action="store_true", help="per difference, the results only (no outputs)")
    args = parser.parse_args()
    if args.meshpilot is None:
        target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
        args.meshpilot = os.path.join(target, "debug/meshpilot")
    args.istioctl = args.istioctl or os.path.join(peer_script("bin-dir"), "istioctl")
    args.module = args.module or peer_script("module-dir")
    for b in (args.meshpilot, args.istioctl):
        if not os.access(b, os.X_OK):
            sys.exit(f"analyze-diff: no executable {b}")
    files = corpus_files(args.module, SUBSET if args.subset else (args.paths or CORPUS))
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(lambda f: (f, compare(args, f)), files))
    differing = [(f, d) for f, d in results if d]
    counts = {}
    for f, diffs in differing:
        rel = os.path.relpath(f, args.module)
        for check, theirs, ours, theirs_out, ours_out in diffs:
            counts[check] = counts.get(check, 0) + 1
            print(f"=== {check} differs: {rel}")
            print(f"  istioctl:  {theirs}")
            print(f"  meshpilot: {ours}")
            if not args.brief:
                print("  --- istioctl output\n" + indent(theirs_out))
                print("  --- meshpilot output\n" + indent(ours_out))
    by_check = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
    print(f"files: {len(files)} agreeing: {len(files) - len(differing)} differing: {len(differing)}"
          + (f" ({by_check})" if by_check else ""))
    return 1 if differing else 0


def indent(text):
    return "\n".join("    " + line for line in text.rstrip().splitlines()[:60])


if __name__ == "__main__":
    sys.exit(main())
