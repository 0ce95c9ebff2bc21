//! WasmPlugin and TrafficExtension in generated listeners and ECDS: placement by phase and priority
//! among the security filters, `match` per direction and port, selection, the ECDS resources, and bad
//! objects reported without touching the others.

use crate::support;

use api::Spec;
use envoy_types::pb::{
    envoy::{
        config::{
            core::v3::{async_data_source, config_source, data_source},
            listener::v3::{Listener, filter},
        },
        extensions::{
            filters::{
                http::{lua::v3::Lua, wasm::v3::Wasm},
                network::http_connection_manager::v3::{HttpConnectionManager, HttpFilter, http_filter},
            },
            wasm::v3::{FailurePolicy, plugin_config},
        },
    },
    google::protobuf::StringValue,
};
use meshpilot_networking::{extension::generate_extension_configs, listener::generate_listeners};
use model::{Severity, push::ProxyContext};
use prost::Message;
use support::*;

const SERVICES: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: ns1}
spec:
  hosts: [web.ns1.svc.cluster.local]
  addresses: [10.1.1.1]
  location: MESH_INTERNAL
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1}]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: app, namespace: ns1}
spec:
  workloadSelector: {labels: {app: app}}
  ingress:
  - port: {number: 9080, protocol: HTTP, name: http}
    defaultEndpoint: 127.0.0.1:8080
  - port: {number: 9081, protocol: HTTP, name: http-admin}
    defaultEndpoint: 127.0.0.1:8081
"#;

const SECURITY: &str = r#"
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: allow, namespace: ns1}
spec:
  selector: {matchLabels: {app: app}}
  rules: [{from: [{source: {namespaces: [ns1]}}]}]
---
apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: jwt, namespace: ns1}
spec:
  selector: {matchLabels: {app: app}}
  jwtRules: [{issuer: https://issuer.example, jwksUri: https://issuer.example/jwks}]
"#;

fn wasm_plugin(name: &str, namespace: &str, extra: &str) -> String {
    format!(
        "apiVersion: extensions.istio.io/v1alpha1\nkind: WasmPlugin\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec:\n  url: file:///opt/{name}.wasm\n{extra}---\n"
    )
}

fn lua(name: &str, namespace: &str, extra: &str) -> String {
    format!(
        "apiVersion: extensions.istio.io/v1alpha1\nkind: TrafficExtension\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec:\n  lua:\n    inlineCode: 'function envoy_on_request(h) end'\n{extra}---\n"
    )
}

fn app() -> ProxyContext {
    sidecar("ns1", &[("app", "app")])
}

/// The HTTP filters of the connection manager of the first HTTP chain of listener `listener` (matching
/// destination port `port` when given).
fn http_filters(listeners: &[Listener], listener: &str, port: Option<u32>) -> Vec<HttpFilter> {
    let l = listeners.iter().find(|l| l.name == listener).unwrap_or_else(|| panic!("no listener {listener}"));
    for c in l.filter_chains.iter().chain(&l.default_filter_chain) {
        let chain_port = c.filter_chain_match.as_ref().and_then(|m| m.destination_port).map(|p| p.value);
        if port.is_some() && chain_port != port {
            continue;
        }
        for f in &c.filters {
            if let Some(filter::ConfigType::TypedConfig(any)) = &f.config_type
                && any.type_url.ends_with("HttpConnectionManager")
            {
                return HttpConnectionManager::decode(any.value.as_slice()).unwrap().http_filters;
            }
        }
    }
    panic!("no HTTP chain for port {port:?} in {listener}")
}

fn names(filters: &[HttpFilter]) -> Vec<String> {
    filters.iter().map(|f| f.name.clone()).collect()
}

const PREFIX: &str = "extensions.istio.io/trafficextension/ns1.";

#[test]
fn extensions_sit_between_istios_security_filters_by_phase_then_priority() {
    let extensions = [
        wasm_plugin("stats", "ns1", "  phase: STATS\n"),
        wasm_plugin("late", "ns1", ""),
        wasm_plugin("authz-low", "ns1", "  phase: AUTHZ\n  priority: 1\n"),
        wasm_plugin("authz-high", "ns1", "  phase: AUTHZ\n  priority: 10\n"),
        lua("authn", "ns1", "  phase: AUTHN\n  selector: {matchLabels: {app: app}}\n"),
    ]
    .concat();
    let world = World::new(parse(&format!("{SERVICES}---\n{SECURITY}---\n{extensions}"), "ns1"));
    let built = generate_listeners(&world.push(), &app(), &[]);
    let inbound = names(&http_filters(&built.resources, "virtualInbound", None));
    let ext = |n: &str| format!("{PREFIX}{n}");
    let wasm = |n: &str| format!("{PREFIX}{n}~istio-translated-wasmplugin");
    assert_eq!(
        inbound,
        [
            ext("authn"),
            "envoy.filters.http.jwt_authn".into(),
            wasm("authz-high"),
            wasm("authz-low"),
            "envoy.filters.http.rbac".into(),
            wasm("stats"),
            wasm("late"),
            "envoy.filters.http.fault".into(),
            "envoy.filters.http.cors".into(),
            "envoy.filters.http.router".into(),
        ]
    );
    // Outbound connection managers have no security filters; the extensions keep their order.
    let outbound = names(&http_filters(&built.resources, "0.0.0.0_80", None));
    assert_eq!(
        &outbound[..5],
        [ext("authn"), wasm("authz-high"), wasm("authz-low"), wasm("stats"), wasm("late")]
    );

    // Lua is inlined; Wasm is discovered over ADS with istiod's config source.
    let filters = http_filters(&built.resources, "virtualInbound", None);
    let Some(http_filter::ConfigType::TypedConfig(any)) = &filters[0].config_type else {
        panic!("{filters:?}")
    };
    let lua = Lua::decode(any.value.as_slice()).unwrap();
    let Some(data_source::Specifier::InlineString(code)) = lua.default_source_code.and_then(|d| d.specifier)
    else {
        panic!("no inline code")
    };
    assert_eq!(code, "function envoy_on_request(h) end");
    let Some(http_filter::ConfigType::ConfigDiscovery(discovery)) = &filters[2].config_type else {
        panic!("{:?}", filters[2])
    };
    assert_eq!(
        discovery.type_urls,
        [
            "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm",
            "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC"
        ]
    );
    let source = discovery.config_source.as_ref().unwrap();
    assert!(matches!(source.config_source_specifier, Some(config_source::ConfigSourceSpecifier::Ads(_))));
    assert_eq!(source.initial_fetch_timeout.unwrap_or_default().seconds, 0);
    assert!(discovery.default_config.is_none() && !discovery.apply_default_config_without_warming);
    assert!(!built.findings.iter().any(|f| f.to_string().contains("Extension")), "{:#?}", built.findings);
}

#[test]
fn match_takes_direction_and_port_and_selection_takes_labels_and_the_root_namespace() {
    let extensions = [
        wasm_plugin("server-9080", "ns1", "  match: [{mode: SERVER, ports: [{number: 9080}]}]\n"),
        wasm_plugin("client", "ns1", "  match: [{mode: CLIENT}]\n"),
        wasm_plugin("other-app", "ns1", "  selector: {matchLabels: {app: other}}\n"),
        wasm_plugin("mesh-wide", "istio-system", ""),
        wasm_plugin("elsewhere", "ns2", ""),
    ]
    .concat();
    let world = World::new(parse(&format!("{SERVICES}---\n{extensions}"), "ns1"));
    let built = generate_listeners(&world.push(), &app(), &[]);
    let exts = |filters: Vec<HttpFilter>| -> Vec<String> {
        names(&filters)
            .into_iter()
            .filter_map(|n| n.strip_prefix("extensions.istio.io/trafficextension/").map(str::to_string))
            .map(|n| n.replace("~istio-translated-wasmplugin", ""))
            .collect()
    };
    // The proxy's namespace first, then the root namespace.
    assert_eq!(
        exts(http_filters(&built.resources, "virtualInbound", Some(9080))),
        ["ns1.server-9080", "istio-system.mesh-wide"]
    );
    assert_eq!(
        exts(http_filters(&built.resources, "virtualInbound", Some(9081))),
        ["istio-system.mesh-wide"]
    );
    assert_eq!(
        exts(http_filters(&built.resources, "0.0.0.0_80", None)),
        ["ns1.client", "istio-system.mesh-wide"]
    );
    // Another workload of the namespace: its own selection.
    let other = generate_listeners(&world.push(), &sidecar("ns1", &[("app", "other")]), &[]);
    assert_eq!(
        exts(http_filters(&other.resources, "0.0.0.0_80", None)),
        ["ns1.client", "ns1.other-app", "istio-system.mesh-wide"]
    );
}

#[test]
fn ecds_sends_the_wasm_filter_as_istiod_builds_it() {
    let plugin = r#"
apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: auth, namespace: ns1, resourceVersion: "42"}
spec:
  url: https://modules.example/auth.wasm
  sha256: 9a5e1e58c2d0b3fb7a0a6b3d0ef4e8d6a8b3c1b2e0d8f7a6c5b4a39281706f5e
  imagePullPolicy: Always
  pluginName: auth-root
  failStrategy: FAIL_OPEN
  pluginConfig: {realm: ingress, retries: 3}
  vmConfig:
    env:
    - {name: POD_NAME, valueFrom: HOST}
    - {name: TRUST_DOMAIN, value: cluster.local}
---
"#;
    let configs = [
        plugin.to_string(),
        wasm_plugin("local", "ns1", ""),
        lua("script", "ns1", ""),
        wasm_plugin("x", "ns2", ""),
    ];
    let world = World::new(parse(&configs.concat(), "ns1"));
    let push = world.push();
    let wanted: Vec<String> = [
        "ns1.auth~istio-translated-wasmplugin",
        "ns1.local~istio-translated-wasmplugin",
        "ns1.script",
        "ns2.x~istio-translated-wasmplugin",
        "ns1.missing",
    ]
    .iter()
    .map(|n| format!("extensions.istio.io/trafficextension/{n}"))
    .collect();
    let built = generate_extension_configs(&push, &app(), &wanted);
    // Lua is inline (no ECDS), another namespace's and unknown names are not answered.
    let got: Vec<&str> = built.resources.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(got, [wanted[0].as_str(), wanted[1].as_str()]);
    let wasm = |i: usize| {
        let any = built.resources[i].typed_config.as_ref().unwrap();
        assert_eq!(any.type_url, "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm");
        Wasm::decode(any.value.as_slice()).unwrap().config.unwrap()
    };
    let auth = wasm(0);
    assert_eq!(auth.name, "ns1.auth~istio-translated-wasmplugin");
    assert_eq!(auth.root_id, "auth-root");
    assert_eq!(auth.failure_policy, FailurePolicy::FailOpen as i32);
    let config = auth.configuration.unwrap();
    assert_eq!(config.type_url, "type.googleapis.com/google.protobuf.StringValue");
    let json: serde_json::Value =
        serde_json::from_str(&StringValue::decode(config.value.as_slice()).unwrap().value).unwrap();
    assert_eq!(json, serde_json::json!({"realm": "ingress", "retries": 3}));
    let Some(plugin_config::Vm::VmConfig(vm)) = auth.vm else { panic!() };
    assert_eq!(vm.runtime, "envoy.wasm.runtime.v8");
    let Some(async_data_source::Specifier::Remote(remote)) = vm.code.unwrap().specifier else { panic!() };
    assert_eq!(remote.sha256.len(), 64);
    let uri = remote.http_uri.unwrap();
    assert_eq!(uri.uri, "https://modules.example/auth.wasm");
    assert_eq!(uri.timeout.unwrap().seconds, 30);
    let env = vm.environment_variables.unwrap();
    assert_eq!(env.host_env_keys, ["POD_NAME"]);
    assert_eq!(env.key_values["TRUST_DOMAIN"], "cluster.local");
    assert_eq!(env.key_values["ISTIO_META_WASM_IMAGE_PULL_POLICY"], "Always");
    assert!(env.key_values.contains_key("ISTIO_META_WASM_PLUGIN_RESOURCE_VERSION"));
    assert!(!env.key_values.contains_key("ISTIO_META_WASM_IMAGE_PULL_SECRET"));

    let local = wasm(1);
    assert_eq!(local.failure_policy, FailurePolicy::FailClosed as i32);
    assert_eq!(local.configuration.unwrap(), Default::default());
    let Some(plugin_config::Vm::VmConfig(vm)) = local.vm else { panic!() };
    let Some(async_data_source::Specifier::Local(file)) = vm.code.unwrap().specifier else { panic!() };
    assert_eq!(file.specifier, Some(data_source::Specifier::Filename("/opt/local.wasm".into())));
}

#[test]
fn a_plugin_with_an_unusable_url_is_reported_and_the_others_still_apply() {
    let mut configs = parse(
        &format!("{SERVICES}---\n{}{}", wasm_plugin("bad", "ns1", ""), wasm_plugin("good", "ns1", "")),
        "ns1",
    );
    for c in &mut configs {
        if c.meta.name == "bad"
            && let Spec::WasmPlugin(p) = &mut c.spec
        {
            p.url = "ftp://modules.example/bad.wasm".into();
        }
    }
    let world = World::new(configs);
    let push = world.push();
    let finding = push
        .findings()
        .iter()
        .find(|f| f.config.as_ref().is_some_and(|k| k.name == "bad"))
        .unwrap_or_else(|| panic!("{:#?}", push.findings()));
    assert_eq!(finding.severity, Severity::Dropped);
    assert_eq!(finding.path, "spec.url");
    assert!(finding.message.contains("\"ftp\" is not one of oci, http, https, file"), "{finding}");
    let built = generate_listeners(&push, &app(), &[]);
    let inbound = names(&http_filters(&built.resources, "virtualInbound", None));
    assert!(inbound.contains(&format!("{PREFIX}good~istio-translated-wasmplugin")), "{inbound:?}");
    assert!(!inbound.iter().any(|n| n.contains("bad")), "{inbound:?}");
    // Nothing else mentions WasmPlugins as untranslated.
    assert!(!push.findings().iter().any(|f| f.message.contains("not translated")), "{:#?}", push.findings());
}

#[test]
fn a_gateway_takes_client_extensions_on_its_server_ports() {
    let gateway = r#"
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 8080, name: http, protocol: HTTP}
    hosts: ["*"]
---
"#;
    let extensions = [
        wasm_plugin("client-8080", "istio-system", "  match: [{mode: CLIENT, ports: [{number: 8080}]}]\n"),
        wasm_plugin("server-only", "istio-system", "  match: [{mode: SERVER}]\n"),
        lua(
            "gateway-only",
            "istio-system",
            "  phase: AUTHN\n  selector: {matchLabels: {istio: ingressgateway}}\n",
        ),
    ]
    .concat();
    let world = World::new(parse(&format!("{SERVICES}---\n{gateway}{extensions}"), "ns1"));
    let built =
        generate_listeners(&world.push(), &router("istio-system", &[("istio", "ingressgateway")]), &[]);
    let filters = names(&http_filters(&built.resources, "0.0.0.0_8080", None));
    let root = "extensions.istio.io/trafficextension/istio-system.";
    assert_eq!(
        filters,
        [
            format!("{root}gateway-only"),
            format!("{root}client-8080~istio-translated-wasmplugin"),
            "envoy.filters.http.fault".into(),
            "envoy.filters.http.cors".into(),
            "envoy.filters.http.router".into(),
        ]
    );
}
