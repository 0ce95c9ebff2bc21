//! TrafficExtension validation, following Istio's `ValidateTrafficExtension` (`validateLuaConfig`,
//! `validateWasmConfigSHA`, `validateWasmConfigImagePullSecret`, `validateWasmConfigName`,
//! `validateTrafficExtensionMatch`, and the WasmPlugin URL and VM checks it reuses) and the rules of
//! the TrafficExtension CRD schema (exactly one of `wasm` and `lua`, one of `selector` and
//! `targetRefs`, lengths, enums, list-map keys).

use api::{
    extensions::{
        traffic_extension::{LuaConfig, TrafficExtension, WasmConfig, traffic_extension::ExecutionPhase},
        wasm_plugin::{FailStrategy, PluginType, PullPolicy},
    },
    meta::ObjectMeta,
};

use super::wasm_plugin::{check_traffic_selector, check_vm_config, validate_plugin_url, validate_sha256};
use crate::common::check_enum;
use crate::{Report, security::authorization_policy::check_policy_selection};

/// Largest inline Lua script (64 KiB), in bytes.
const MAX_LUA_CODE: usize = 65536;

/// Validates a TrafficExtension; findings use paths from the document root (`spec.…`).
///
/// Follows Istio's `ValidateTrafficExtension`: exactly one of `wasm` and `lua`, the selector /
/// target references, the Lua script (set, at most 64 KiB), the Wasm module (URL, checksum, pull
/// secret of at most 253 characters, plugin name of at most 256, VM environment) and the traffic
/// selectors' ports; plus the CRD's enums and list-map keys.
pub fn validate(meta: &ObjectMeta, spec: &TrafficExtension, report: &mut Report) {
    let _ = meta;
    if spec.wasm.is_some() == spec.lua.is_some() {
        report.error("spec", "exactly one of wasm or lua must be set");
    }
    check_policy_selection(spec.selector.as_ref(), None, &spec.target_refs, report);
    check_enum::<ExecutionPhase>("spec.phase", spec.phase, report);
    if let Some(lua) = &spec.lua {
        check_lua(lua, report);
    }
    if let Some(wasm) = &spec.wasm {
        check_wasm(wasm, report);
    }
    for (i, selector) in spec.r#match.iter().enumerate() {
        check_traffic_selector(i, selector.mode, &selector.ports, report);
    }
}

/// Istio's `validateLuaConfig`.
fn check_lua(lua: &LuaConfig, report: &mut Report) {
    if lua.inline_code.is_empty() {
        report.error("spec.lua.inlineCode", "lua.inlineCode cannot be empty");
    } else if lua.inline_code.len() > MAX_LUA_CODE {
        report.error("spec.lua.inlineCode", "lua.inlineCode exceeds maximum size of 64KB");
    }
}

/// The Wasm module settings (Istio's checks of `wasm`, with the CRD's enums).
fn check_wasm(wasm: &WasmConfig, report: &mut Report) {
    report.check("spec.wasm.url", validate_plugin_url(&wasm.url));
    report.check("spec.wasm.sha256", validate_sha256(&wasm.sha256));
    if wasm.image_pull_secret.len() > 253 {
        report.error(
            "spec.wasm.imagePullSecret",
            "imagePullSecret field must be less than 253 characters long",
        );
    }
    if wasm.plugin_name.len() > 256 {
        report.error("spec.wasm.pluginName", "pluginName field must be less than 256 characters long");
    }
    check_enum::<PullPolicy>("spec.wasm.imagePullPolicy", wasm.image_pull_policy, report);
    check_enum::<FailStrategy>("spec.wasm.failStrategy", wasm.fail_strategy, report);
    check_enum::<PluginType>("spec.wasm.type", wasm.r#type, report);
    check_vm_config("spec.wasm.vmConfig", wasm.vm_config.as_ref(), report);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{meta, run, spec};

    fn check(yaml: &str) -> Report {
        let extension: TrafficExtension = spec(yaml);
        run(validate, &meta("name", "namespace"), &extension)
    }

    const LUA: &str = "lua:\n  inlineCode: \"function envoy_on_request() end\"\n";

    /// `(name, yaml, expected error substring and path or None)`.
    /// An expected error: a substring of its message and its path.
    type Expect = Option<(&'static str, &'static str)>;

    const CASES: &[(&str, &str, Expect)] = &[
        ("neither wasm nor lua set", "{}", Some(("exactly one of wasm or lua must be set", "spec"))),
        (
            "both wasm and lua set",
            "wasm: {url: http://test.com/test}\nlua: {inlineCode: x}\n",
            Some(("exactly one of wasm or lua must be set", "spec")),
        ),
        (
            "valid lua config",
            "lua:\n  inlineCode: \"function envoy_on_request(request_handle)\\n  request_handle:headers():add('x-foo', 'bar')\\nend\"\n",
            None,
        ),
        (
            "lua code empty",
            "lua:\n  inlineCode: \"\"\n",
            Some(("lua.inlineCode cannot be empty", "spec.lua.inlineCode")),
        ),
        ("lua empty object", "lua: {}\n", Some(("lua.inlineCode cannot be empty", "spec.lua.inlineCode"))),
        ("valid wasm config", "wasm: {url: http://test.com/test}\n", None),
        ("wasm url empty", "wasm: {url: \"\"}\n", Some(("url field needs to be set", "spec.wasm.url"))),
        (
            "wasm wrong scheme",
            "wasm: {url: ftp://test.com/test}\n",
            Some(("unsupported scheme", "spec.wasm.url")),
        ),
        (
            "wasm valid http w/ sha",
            "wasm: {url: http://test.com/test, sha256: 01ba4719c80b6fe911b091a7c05124b64eeece964e09c058ef8f9805daca546b}\n",
            None,
        ),
        (
            "wasm short sha",
            "wasm: {url: http://test.com/test, sha256: 01ba47}\n",
            Some(("sha256 field must be 64 characters long", "spec.wasm.sha256")),
        ),
        (
            "wasm invalid sha characters",
            "wasm: {url: http://test.com/test, sha256: 01Ba4719c80b6fe911b091a7c05124b64eeece964e09c058ef8f9805daca546b}\n",
            Some(("sha256 field must match [a-f0-9]{64} pattern", "spec.wasm.sha256")),
        ),
        ("wasm valid oci", "wasm: {url: oci://test.com/test}\n", None),
        ("wasm valid oci no scheme", "wasm: {url: test.com/test}\n", None),
        (
            "wasm invalid vm config - invalid env name",
            "wasm:\n  url: test.com/test\n  vmConfig:\n    env:\n    - {name: \"\", valueFrom: HOST}\n",
            Some(("spec.vmConfig.env invalid", "spec.wasm.vmConfig.env[0].name")),
        ),
        (
            "wasm invalid vm config - duplicate env",
            "wasm:\n  url: test.com/test\n  vmConfig:\n    env:\n    - {name: ENV1, value: VAL1}\n    - {name: ENV1, value: VAL1}\n",
            Some(("duplicate env", "spec.wasm.vmConfig.env[1].name")),
        ),
        (
            "wasm host env with value",
            "wasm:\n  url: test.com/test\n  vmConfig:\n    env:\n    - {name: ENV1, valueFrom: HOST, value: v}\n",
            Some(("value may only be set when valueFrom is INLINE", "spec.wasm.vmConfig.env[0].value")),
        ),
        (
            "valid lua with selector",
            "selector:\n  matchLabels: {app: test}\nlua:\n  inlineCode: \"function envoy_on_request() end\"\n",
            None,
        ),
        (
            "valid lua with targetRefs",
            "targetRefs:\n- {group: gateway.networking.k8s.io, kind: Gateway, name: gateway}\nlua:\n  inlineCode: \"function envoy_on_request() end\"\n",
            None,
        ),
        (
            "both selector and targetRefs",
            "selector:\n  matchLabels: {app: test}\ntargetRefs:\n- {group: gateway.networking.k8s.io, kind: Gateway, name: gateway}\nlua:\n  inlineCode: x\n",
            Some(("only one of targetRefs or workloadSelector can be set", "spec")),
        ),
        (
            "bad targetRef",
            "targetRefs:\n- {group: gateway.networking.k8s.io, kind: Gateway}\nlua:\n  inlineCode: x\n",
            Some(("targetRef name must be set", "spec.targetRefs[0]")),
        ),
        (
            "invalid match - port out of range (too low)",
            "match:\n- ports: [{number: 0}]\nlua:\n  inlineCode: x\n",
            Some(("spec.Match[0].Ports[0] is out of range: 0", "spec.match[0].ports[0].number")),
        ),
        (
            "invalid match - port out of range (too high)",
            "match:\n- ports: [{number: 65536}]\nlua:\n  inlineCode: x\n",
            Some(("spec.Match[0].Ports[0] is out of range: 65536", "spec.match[0].ports[0].number")),
        ),
        (
            "valid match with port",
            "match:\n- mode: CLIENT\n  ports: [{number: 8080}]\nlua:\n  inlineCode: x\n",
            None,
        ),
        (
            "unknown phase number",
            "phase: 7\nlua:\n  inlineCode: x\n",
            Some(("Unsupported value: 7", "spec.phase")),
        ),
    ];

    #[test]
    fn istio_cases() {
        for (name, yaml, expected) in CASES {
            crate::testutil::assert_error(name, &check(yaml), *expected);
        }
        assert!(check(LUA).is_valid());
    }

    #[test]
    fn size_limits() {
        let code = "x".repeat(MAX_LUA_CODE + 1);
        let report = check(&format!("lua:\n  inlineCode: {code}\n"));
        assert!(report.errors.iter().any(|e| e.message == "lua.inlineCode exceeds maximum size of 64KB"));
        let name = "n".repeat(257);
        let report = check(&format!("wasm:\n  url: test.com/test\n  pluginName: {name}\n"));
        assert!(report.errors.iter().any(|e| e.path == "spec.wasm.pluginName"
            && e.message == "pluginName field must be less than 256 characters long"));
        assert!(
            check(&format!("wasm:\n  url: test.com/test\n  pluginName: {}\n", "n".repeat(256))).is_valid()
        );
    }
}
