#!/usr/bin/env python3
"""Compares meshpilot's authorization filters with Istio's golden files, as decoded protos.

Usage: authz-golden.py MANIFEST.json

The manifest maps each case name to
  {"type": "http" | "tcp", "want": [YAML files], "got": [binary protobuf files]}
where each `want` file is one filter in protojson YAML (Istio's builder testdata) and each `got` file
holds one filter we built, serialized as
envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter ("http") or
envoy.config.listener.v3.Filter ("tcp"). Both sides are decoded into the same message type (`Any`
resolved through the xds-protos modules imported below), normalized (every `Any` re-packed with
deterministic serialization, so map order does not matter) and compared with `==`.

Prints one line per case (`ok` / `MISMATCH`), a unified diff of the text format of both sides for each
mismatch, and exits 1 listing the failing cases. Needs .venv-grpc (scripts/install-grpcio.sh).
"""

import difflib
import json
import sys

import yaml
from google.protobuf import any_pb2, json_format, symbol_database, text_format

# Imported for their registration in the default descriptor pool (Any resolution).
import envoy.config.rbac.v3.rbac_pb2  # noqa: F401
import envoy.extensions.filters.http.ext_authz.v3.ext_authz_pb2  # noqa: F401
import envoy.extensions.filters.http.rbac.v3.rbac_pb2  # noqa: F401
import envoy.extensions.filters.network.ext_authz.v3.ext_authz_pb2  # noqa: F401
import envoy.extensions.filters.network.rbac.v3.rbac_pb2  # noqa: F401
import envoy.extensions.path.match.uri_template.v3.uri_template_match_pb2  # noqa: F401
from envoy.config.listener.v3 import listener_components_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2

MESSAGES = {
    "http": http_connection_manager_pb2.HttpFilter,
    "tcp": listener_components_pb2.Filter,
}

_DB = symbol_database.Default()


def is_repeated(field):
    # `is_repeated` in recent protobuf releases, `label` in older ones.
    if hasattr(field, "is_repeated"):
        return field.is_repeated
    return field.label == field.LABEL_REPEATED


def normalize(msg):
    """Re-packs every Any inside msg (recursively) with deterministic serialization."""
    for field, value in msg.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.has_options and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            if value_field.message_type is not None:
                for key in value:
                    normalize(value[key])
            continue
        items = value if is_repeated(field) else [value]
        for item in items:
            if isinstance(item, any_pb2.Any):
                normalize_any(item)
            else:
                normalize(item)
    return msg


def normalize_any(any_msg):
    name = any_msg.TypeName()
    inner = _DB.GetSymbol(name)()
    if not any_msg.Unpack(inner):
        raise ValueError(f"cannot unpack Any of type {name}")
    normalize(inner)
    any_msg.Pack(inner, deterministic=True)


def text(msg):
    return text_format.MessageToString(msg, descriptor_pool=_DB.pool)


def compare(name, case):
    cls = MESSAGES[case["type"]]
    want = []
    for path in case["want"]:
        with open(path, encoding="utf-8") as f:
            want.append(normalize(json_format.ParseDict(yaml.safe_load(f), cls())))
    got = []
    for path in case["got"]:
        with open(path, "rb") as f:
            msg = cls()
            msg.ParseFromString(f.read())
            got.append(normalize(msg))
    if len(want) == len(got) and all(w == g for w, g in zip(want, got)):
        return True
    print(f"MISMATCH {name}: want {len(want)} filters, got {len(got)}")
    for i in range(max(len(want), len(got))):
        w = text(want[i]) if i < len(want) else ""
        g = text(got[i]) if i < len(got) else ""
        if w != g:
            diff = difflib.unified_diff(
                w.splitlines(), g.splitlines(), f"want[{i}]", f"got[{i}]", lineterm=""
            )
            print("\n".join(diff))
        elif i < len(want) and i < len(got) and want[i] != got[i]:
            print(f"filter {i}: text formats equal but messages differ")
    return False


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        manifest = json.load(f)
    failed = []
    for name, case in manifest.items():
        try:
            ok = compare(name, case)
        except Exception as e:  # a malformed file is a failure of that case, not of the run
            print(f"MISMATCH {name}: {type(e).__name__}: {e}")
            ok = False
        if ok:
            print(f"ok {name}")
        else:
            failed.append(name)
    print(f"{len(manifest) - len(failed)}/{len(manifest)} cases equal")
    if failed:
        print("failing cases: " + ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
