//! Listener shapes: sidecar TCP/TLS ports, VIP listeners, inbound; gateway HTTPS, passthrough, TCP and
//! redirects.

use crate::support;

use envoy_types::pb::envoy::{
    config::{core::v3::transport_socket::ConfigType, route::v3::virtual_host::TlsRequirementType},
    extensions::{
        transport_sockets::tls::v3::DownstreamTlsContext,
        upstreams::http::v3::{HttpProtocolOptions, http_protocol_options::UpstreamProtocolOptions},
    },
};
use meshpilot_networking::{
    cluster::generate_clusters, debug::listener_summary, listener::generate_listeners, rds::generate_routes,
};
use model::Severity;
use serde_json::Value;
use support::*;

const SERVICES: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: ns1}
spec:
  hosts: [db.ns1.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 3306, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: pg, namespace: ns1}
spec:
  hosts: [pg.ns1.svc.cluster.local]
  addresses: [10.1.1.1]
  location: MESH_INTERNAL
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.2}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: ns1}
spec:
  hosts: [www.example.com, api.example.com]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: vault, namespace: ns1}
spec:
  hosts: [vault.example.com]
  addresses: [10.2.2.2]
  ports: [{number: 443, name: https, protocol: HTTPS}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: range, namespace: ns1}
spec:
  hosts: [range.example.com]
  addresses: [10.8.0.0/16]
  ports: [{number: 3306, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.8.0.1}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: shards, namespace: ns1}
spec:
  hosts: [shards.example.com]
  location: MESH_INTERNAL
  ports: [{number: 27017, name: mongo, protocol: MONGO}]
  resolution: NONE
  workloadSelector: {labels: {app: shards}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: shard-1, namespace: ns1}
spec: {address: 10.3.0.1, labels: {app: shards}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: shard-2, namespace: ns1}
spec: {address: 10.3.0.2, labels: {app: shards}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: mixed, namespace: ns1}
spec:
  hosts: [tcp-on-80.example.com]
  ports: [{number: 80, name: tcp, protocol: TCP}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: http, namespace: ns1}
spec:
  hosts: [http.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: db, namespace: ns1}
spec:
  hosts: [db]
  tcp:
  - match: [{port: 3306}]
    route:
    - {destination: {host: db, subset: a}, weight: 80}
    - {destination: {host: db, subset: b}, weight: 20}
"#;

fn listeners(proxy: &model::push::ProxyContext) -> (Vec<Value>, Vec<model::Finding>) {
    let w = World::new(parse(SERVICES, "ns1"));
    let out = generate_listeners(&w.push(), proxy, &[]);
    (out.resources.iter().map(listener_summary).collect(), out.findings)
}

fn by_name<'a>(ls: &'a [Value], name: &str) -> &'a Value {
    ls.iter().find(|l| l["name"] == name).unwrap_or_else(|| panic!("no listener {name}: {ls:#?}"))
}

#[test]
fn sidecar_tcp_tls_and_vip_listeners() {
    let (ls, findings) = listeners(&sidecar("ns1", &[]));
    let db = by_name(&ls, "0.0.0.0_3306");
    assert_eq!(db["listener_filters"].as_array().map(Vec::len), Some(0), "nothing to sniff on a TCP port");
    assert_eq!(db["bind_to_port"], false);
    // The CIDR service shares the wildcard listener with a destination match; the service without
    // address takes every other connection (the listener's default chain, as istiod).
    assert_eq!(db["filter_chains"].as_array().map(Vec::len), Some(1));
    assert_eq!(db["filter_chains"][0]["prefix_ranges"][0], "10.8.0.0/16");
    assert_eq!(db["filter_chains"][0]["filters"][0]["target"]["cluster"], "outbound|3306||range.example.com");
    assert_eq!(db["default_filter_chain"]["prefix_ranges"].as_array().map(Vec::len), Some(0));
    let weighted = &db["default_filter_chain"]["filters"][0]["target"]["weighted_clusters"];
    assert_eq!(weighted[0]["name"], "outbound|3306|a|db.ns1.svc.cluster.local", "VirtualService TCP route");
    assert_eq!(weighted[1]["weight"], 20);
    let pg = by_name(&ls, "10.1.1.1_5432");
    assert_eq!(pg["address"], "10.1.1.1:5432");
    assert_eq!(
        pg["filter_chains"][0]["filters"][0]["target"]["cluster"],
        "outbound|5432||pg.ns1.svc.cluster.local"
    );
    let tls = by_name(&ls, "0.0.0.0_443");
    assert_eq!(tls["listener_filters"][0], "envoy.filters.listener.tls_inspector");
    let sni: Vec<&Value> =
        tls["filter_chains"].as_array().unwrap().iter().map(|c| &c["server_names"][0]).collect();
    assert_eq!(sni, ["api.example.com", "www.example.com"]);
    // An HTTPS service with a VIP: its own listener, one chain for every connection, no SNI (Istio's
    // `10.0.0.1_443` for the `kubernetes` Service).
    let vault = by_name(&ls, "10.2.2.2_443");
    assert_eq!(vault["address"], "10.2.2.2:443");
    assert_eq!(vault["listener_filters"].as_array().map(Vec::len), Some(0));
    assert_eq!(vault["filter_chains"].as_array().map(Vec::len), Some(1));
    assert_eq!(vault["filter_chains"][0]["server_names"].as_array().map(Vec::len), Some(0));
    assert_eq!(
        vault["filter_chains"][0]["filters"][0]["target"]["cluster"],
        "outbound|443||vault.example.com"
    );
    // resolution NONE without address, non-HTTP port: one listener per endpoint.
    for ip in ["10.3.0.1", "10.3.0.2"] {
        let l = by_name(&ls, &format!("{ip}_27017"));
        assert_eq!(
            l["filter_chains"][0]["filters"][0]["target"]["cluster"],
            "outbound|27017||shards.example.com"
        );
    }
    assert!(!ls.iter().any(|l| l["name"] == "0.0.0.0_27017"));
    // HTTP and a TCP service without VIP share port 80: the listener sniffs (Istio's `HTTPOverTCP`
    // merge): plaintext HTTP goes to RDS `80`, everything else to the TCP service.
    let p80 = by_name(&ls, "0.0.0.0_80");
    assert_eq!(p80["listener_filters"], serde_json::json!(["envoy.filters.listener.http_inspector"]));
    assert_eq!(p80["filter_chains"][0]["filters"][0]["routes"]["rds"], "80");
    assert_eq!(p80["filter_chains"][0]["application_protocols"], serde_json::json!(["http/1.1", "h2c"]));
    assert_eq!(p80["filter_chains"][0]["transport_protocol"], "raw_buffer");
    assert_eq!(
        p80["default_filter_chain"]["filters"][0]["target"]["cluster"],
        "outbound|80||tcp-on-80.example.com"
    );
    assert!(!findings.iter().any(|f| f.message.contains("tcp-on-80.example.com")), "{findings:#?}");
    assert!(ls.iter().any(|l| l["name"] == "virtualOutbound" && l["use_original_dst"] == true));
}

#[test]
fn without_capture_non_http_ports_stay_on_loopback_and_tls_has_no_sni() {
    // Istio binds every listener of a sidecar without capture to 127.0.0.1; a TLS chain matches the
    // hostname only when the service address is a CIDR, so the TLS services of port 443 (two without
    // address, one with a VIP) compete for one chain: the first service keeps it.
    let (ls, findings) = listeners(&loopback_sidecar("ns1"));
    let mut names: Vec<&str> = ls.iter().filter_map(|l| l["name"].as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["127.0.0.1_27017", "127.0.0.1_3306", "127.0.0.1_443", "127.0.0.1_5432", "127.0.0.1_80"]
    );
    let tls = by_name(&ls, "127.0.0.1_443");
    assert_eq!(tls["bind_to_port"], Value::Null);
    assert_eq!(tls["filter_chains"].as_array().map(Vec::len), Some(1));
    assert_eq!(tls["filter_chains"][0]["server_names"].as_array().map(Vec::len), Some(0));
    assert_eq!(tls["filter_chains"][0]["filters"][0]["target"]["cluster"], "outbound|443||api.example.com");
    for left_out in ["vault.example.com", "www.example.com"] {
        assert!(
            findings.iter().any(|f| f.severity == Severity::Dropped
                && f.resource == "127.0.0.1_443"
                && f.message.contains(left_out)),
            "{left_out}: {findings:#?}"
        );
    }
    // No destination CIDR match without capture either: the two TCP services of 3306 compete too.
    let db = by_name(&ls, "127.0.0.1_3306");
    assert_eq!(db["filter_chains"].as_array().map(Vec::len), Some(1));
    assert!(
        findings.iter().any(|f| f.resource == "127.0.0.1_3306" && f.message.contains("range.example.com"))
    );
}

#[test]
fn inbound_listener_and_clusters_for_instances() {
    let w = World::new(bookinfo_example(false));
    let mut proxy = sidecar("bookinfo", &[("app", "reviews")]);
    proxy.ips = vec!["127.0.0.1".into()];
    proxy.set_instances_from(&w.discovery);
    let push = w.push();
    let lds = generate_listeners(&push, &proxy, &["virtualInbound".to_string()]);
    let inbound = listener_summary(&lds.resources[0]);
    assert_eq!(inbound["address"], "0.0.0.0:15006");
    assert_eq!(inbound["listener_filters"][0], "envoy.filters.listener.original_dst");
    let ports: Vec<&Value> =
        inbound["filter_chains"].as_array().unwrap().iter().map(|c| &c["destination_port"]).collect();
    assert!(ports.contains(&&Value::from(19084)), "{ports:?}");
    assert_eq!(
        inbound["filter_chains"].as_array().unwrap().last().unwrap()["name"],
        "PassthroughFilterChain"
    );
    let cds = generate_clusters(&push, &proxy, &[]);
    assert!(cds.resources.iter().any(|c| c.name == "inbound|19084||"));
    assert!(cds.resources.iter().any(|c| c.name == "InboundPassthroughCluster"));
    // Without interception: no inbound listeners or clusters (as Istio without Sidecar ingress).
    let mut none = loopback_sidecar("bookinfo");
    none.service_instances = proxy.service_instances.clone();
    assert!(generate_clusters(&push, &none, &[]).resources.iter().all(|c| !c.name.starts_with("inbound|")));
    assert!(generate_listeners(&push, &none, &[]).resources.iter().all(|l| l.name != "virtualInbound"));
}

const GATEWAYS: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: app, namespace: apps}
spec:
  hosts: [app.apps.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 8080, name: http, protocol: HTTP}, {number: 9000, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.5}]
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: apps}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: ["*.example.com"]
    tls: {httpsRedirect: true}
  - port: {number: 443, name: https, protocol: HTTPS}
    hosts: ["apps/app.example.com"]
    tls: {mode: SIMPLE, serverCertificate: /certs/cert.pem, privateKey: /certs/key.pem}
  - port: {number: 443, name: https-secret, protocol: HTTPS}
    hosts: ["other.example.com"]
    tls: {mode: SIMPLE, credentialName: other-cert}
  - port: {number: 443, name: tls, protocol: TLS}
    hosts: ["pass.example.com"]
    tls: {mode: PASSTHROUGH}
  - port: {number: 31400, name: tcp, protocol: TCP}
    hosts: ["tcp.example.com"]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: app, namespace: apps}
spec:
  hosts: [app.example.com, pass.example.com, tcp.example.com]
  gateways: [gw]
  http:
  - route: [{destination: {host: app, port: {number: 8080}}}]
  tls:
  - match: [{sniHosts: [pass.example.com]}]
    route: [{destination: {host: app, port: {number: 9000}}}]
  tcp:
  - match: [{port: 31400}]
    route: [{destination: {host: app, port: {number: 9000}}}]
"#;

#[test]
fn gateway_https_passthrough_tcp_and_redirect() {
    let w = World::new(parse(GATEWAYS, "apps"));
    let push = w.push();
    let gw = router("istio-system", &[("istio", "ingressgateway")]);
    let out = generate_listeners(&push, &gw, &[]);
    let ls: Vec<Value> = out.resources.iter().map(listener_summary).collect();
    let names: Vec<&Value> = ls.iter().map(|l| &l["name"]).collect();
    assert_eq!(names, ["0.0.0.0_31400", "0.0.0.0_443", "0.0.0.0_80"], "{:#?}", out.findings);

    let https = by_name(&ls, "0.0.0.0_443");
    assert_eq!(https["listener_filters"][0], "envoy.filters.listener.tls_inspector");
    let chains = https["filter_chains"].as_array().unwrap();
    assert_eq!(chains.len(), 3, "{chains:#?}");
    assert_eq!(chains[0]["server_names"][0], "app.example.com");
    assert_eq!(chains[0]["tls"], true);
    // The certificate files are an SDS secret, never file paths in LDS.
    let l443 = out.resources.iter().find(|l| l.name == "0.0.0.0_443").unwrap();
    let common_tls = |chain: usize| {
        let Some(ConfigType::TypedConfig(any)) =
            l443.filter_chains[chain].transport_socket.as_ref().and_then(|t| t.config_type.clone())
        else {
            panic!("no TLS transport socket on chain {chain}")
        };
        <DownstreamTlsContext as prost::Message>::decode(any.value.as_slice())
            .unwrap()
            .common_tls_context
            .unwrap()
    };
    let common = common_tls(0);
    assert!(common.tls_certificates.is_empty());
    assert_eq!(common.tls_certificate_sds_secret_configs[0].name, "file-cert:/certs/cert.pem~/certs/key.pem");
    assert_eq!(chains[0]["filters"][0]["routes"]["rds"], "https.443.https.gw.apps");
    // A credentialName server: its certificate is the SDS secret `kubernetes://NAME` (Istio's name).
    assert_eq!(chains[1]["server_names"][0], "other.example.com");
    assert_eq!(chains[1]["tls"], true);
    assert_eq!(chains[1]["filters"][0]["routes"]["rds"], "https.443.https-secret.gw.apps");
    assert_eq!(common_tls(1).tls_certificate_sds_secret_configs[0].name, "kubernetes://other-cert");
    assert_eq!(chains[2]["server_names"][0], "pass.example.com");
    assert_eq!(chains[2]["tls"], false);
    assert_eq!(chains[2]["filters"][0]["target"]["cluster"], "outbound|9000||app.apps.svc.cluster.local");
    assert!(
        !out.findings.iter().any(|f| f.path == "spec.servers[2].tls.credentialName"),
        "{:?}",
        out.findings
    );

    let tcp = by_name(&ls, "0.0.0.0_31400");
    assert_eq!(
        tcp["filter_chains"][0]["filters"][0]["target"]["cluster"],
        "outbound|9000||app.apps.svc.cluster.local"
    );

    let rds = generate_routes(&push, &gw, &[]);
    let route_names: Vec<&str> = rds.resources.iter().map(|r| r.name.as_str()).collect();
    // Every HTTPS server's route table, the credentialName one included (its listener chain names it).
    assert_eq!(route_names, ["http.80", "https.443.https-secret.gw.apps", "https.443.https.gw.apps"]);
    let http80 = &rds.resources[0];
    assert!(http80.virtual_hosts.iter().all(|v| v.require_tls == TlsRequirementType::All as i32));
    assert!(http80.virtual_hosts.iter().any(|v| v.domains == ["app.example.com"]), "VS host ∩ server host");
    assert!(
        http80.virtual_hosts.iter().any(|v| v.domains == ["*.example.com"]),
        "redirect for the server host"
    );
    let https_rc = &rds.resources[2];
    assert_eq!(https_rc.virtual_hosts.len(), 1);
    assert_eq!(https_rc.virtual_hosts[0].domains, ["app.example.com"]);
}

/// The gateway's own Service: port 80 → 8080 and 443 → 8443 (Istio's ingress gateway chart), the
/// router (10.9.9.9) its endpoint through a WorkloadEntry.
fn gateway_service(extra_labels: &str) -> String {
    format!(
        r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: istio-ingressgateway, namespace: istio-system, labels: {{{extra_labels}}}}}
spec:
  hosts: [istio-ingressgateway.istio-system.svc.cluster.local]
  location: MESH_INTERNAL
  ports:
  - {{number: 80, name: http2, protocol: HTTP, targetPort: 8080}}
  - {{number: 443, name: https, protocol: HTTPS, targetPort: 8443}}
  resolution: STATIC
  workloadSelector: {{labels: {{istio: ingressgateway}}}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {{name: gw-pod, namespace: istio-system}}
spec:
  address: 10.9.9.9
  labels: {{istio: ingressgateway}}
---
"#
    )
}

fn gateway_pod(w: &World) -> model::push::ProxyContext {
    let mut gw = router("istio-system", &[("istio", "ingressgateway")]);
    gw.ips = vec!["10.9.9.9".into()];
    gw.set_instances_from(&w.discovery);
    assert!(!gw.service_instances.is_empty(), "the router is an instance of its gateway service");
    gw
}

/// Istio's `resolvePorts`: a Gateway port names a port of the gateway's Service and the router listens
/// on its targetPort; routes are still matched and virtual hosts still named with the Gateway's port.
/// A port no service declares is listened on as written; the opt-out label turns translation off.
#[test]
fn gateway_ports_are_translated_to_the_gateway_services_target_ports() {
    let w = World::new(parse(&(gateway_service("") + GATEWAYS), "apps"));
    let push = w.push();
    let gw = gateway_pod(&w);
    let out = generate_listeners(&push, &gw, &[]);
    let ls: Vec<Value> = out.resources.iter().map(listener_summary).collect();
    let names: Vec<&Value> = ls.iter().map(|l| &l["name"]).collect();
    assert_eq!(names, ["0.0.0.0_31400", "0.0.0.0_8080", "0.0.0.0_8443"], "{:#?}", out.findings);
    assert_eq!(by_name(&ls, "0.0.0.0_8080")["address"], "0.0.0.0:8080");
    assert_eq!(by_name(&ls, "0.0.0.0_8080")["filter_chains"][0]["filters"][0]["routes"]["rds"], "http.8080");
    let chains = by_name(&ls, "0.0.0.0_8443")["filter_chains"].as_array().unwrap().clone();
    // Istio's gatewayRDSRouteName: an HTTPS server's route configuration carries the server's own port.
    assert_eq!(chains[0]["filters"][0]["routes"]["rds"], "https.443.https.gw.apps");
    assert_eq!(
        chains[2]["server_names"][0], "pass.example.com",
        "TLS routes still match the Gateway port 443"
    );
    assert_eq!(chains[2]["filters"][0]["target"]["cluster"], "outbound|9000||app.apps.svc.cluster.local");

    let names: Vec<String> = ["http.8080", "https.443.https.gw.apps"].map(String::from).to_vec();
    let rds = generate_routes(&push, &gw, &names);
    let http = &rds.resources[0];
    assert_eq!(http.name, "http.8080");
    let vhosts: Vec<&str> = http.virtual_hosts.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(
        vhosts,
        ["*.example.com:80", "app.example.com:80", "pass.example.com:80", "tcp.example.com:80"],
        "virtual hosts keep the Gateway's port in their names"
    );
    assert!(http.virtual_hosts.iter().all(|v| v.require_tls == TlsRequirementType::All as i32));
    let https = &rds.resources[1];
    assert_eq!(https.virtual_hosts[0].name, "app.example.com:443");
    assert!(!https.virtual_hosts[0].routes.is_empty(), "the HTTPS routes are the VirtualService's");

    // The Service opts out: ports are bound as written (Istio's DisableGatewayPortTranslationLabel).
    let w = World::new(parse(
        &(gateway_service("experimental.istio.io/disable-gateway-port-translation: 'true'") + GATEWAYS),
        "apps",
    ));
    let out = generate_listeners(&w.push(), &gateway_pod(&w), &[]);
    let names: Vec<&str> = out.resources.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["0.0.0.0_31400", "0.0.0.0_443", "0.0.0.0_80"]);
}

/// EnvoyFilter `routeConfiguration.portNumber` on a gateway matches the Gateway server's port, not the
/// listener port it is translated to (Istio's `GatewayPortMap` / `anyPortMatches`): `http.8080` is
/// server port 80's. HTTPS route configurations carry the server port in their name.
#[test]
fn gateway_route_patches_match_the_server_port_behind_a_translated_route_name() {
    let patch = |port: u32, header: &str| {
        format!(
            r#"  - applyTo: ROUTE_CONFIGURATION
    match: {{context: GATEWAY, routeConfiguration: {{portNumber: {port}}}}}
    patch: {{operation: MERGE, value: {{response_headers_to_add: [{{header: {{key: {header}, value: "yes"}}}}]}}}}
"#
        )
    };
    let filter = format!(
        "apiVersion: networking.istio.io/v1alpha3\nkind: EnvoyFilter\nmetadata: {{name: ports, namespace: istio-system}}\nspec:\n  configPatches:\n{}{}{}---\n",
        patch(80, "x-server-port"),
        patch(8080, "x-listener-port"),
        patch(443, "x-https"),
    );
    let w = World::new(parse(&(gateway_service("") + GATEWAYS + "---\n" + &filter), "apps"));
    let push = w.push();
    let gw = gateway_pod(&w);
    let names: Vec<String> = ["http.8080", "https.443.https.gw.apps"].map(String::from).to_vec();
    let rds = generate_routes(&push, &gw, &names);
    let headers = |i: usize| -> Vec<String> {
        rds.resources[i]
            .response_headers_to_add
            .iter()
            .filter_map(|h| h.header.as_ref().map(|h| h.key.clone()))
            .collect()
    };
    assert_eq!(headers(0), ["x-server-port"], "{:#?}", rds.findings);
    assert_eq!(headers(1), ["x-https"]);
}

/// A Gateway generated for gateway services (the Gateway API's `internal.istio.io/gateway-service`)
/// applies through those services only: a port one of them declares is listened on at its targetPort,
/// a port none declares gets no listener and a finding naming the port.
#[test]
fn service_named_gateways_listen_only_on_their_services_ports() {
    let gateway = r#"
apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: web-http
  namespace: istio-system
  annotations: {internal.istio.io/gateway-service: istio-ingressgateway.istio-system.svc.cluster.local}
spec:
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: ["*/*"]
  - port: {number: 8081, name: http-other, protocol: HTTP}
    hosts: ["*/*"]
"#;
    let w = World::new(parse(&(gateway_service("") + gateway), "istio-system"));
    let push = w.push();
    let out = generate_listeners(&push, &gateway_pod(&w), &[]);
    let names: Vec<&str> = out.resources.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["0.0.0.0_8080"], "{:#?}", out.findings);
    let finding = out
        .findings
        .iter()
        .find(|f| f.path == "spec.servers[1].port.number")
        .unwrap_or_else(|| panic!("no finding for the undeclared port: {:#?}", out.findings));
    assert_eq!(finding.severity, Severity::Dropped);
    assert!(finding.message.contains("port 8081"), "{}", finding.message);
    // Not an instance of the named service: the Gateway does not apply at all.
    let stranger = router("istio-system", &[("istio", "ingressgateway")]);
    assert!(generate_listeners(&push, &stranger, &[]).resources.is_empty());
}

/// Ports without a declared protocol (Istio's auto-detection): services with a VIP
/// get a listener of their own with a TCP chain and a sniffed HTTP chain on RDS `HOST:PORT`, whose
/// table holds that service only, for every domain; services without an address share `0.0.0.0_PORT`
/// and RDS `PORT`. Their clusters carry the client's HTTP version upstream.
#[test]
fn ports_without_a_protocol_are_sniffed() {
    let w = World::new(parse(
        r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: vip, namespace: ns1}
spec:
  hosts: [vip.example.com]
  addresses: [240.240.0.1]
  ports: [{number: 7070, name: auto, protocol: ""}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: other, namespace: ns1}
spec:
  hosts: [other.example.com]
  addresses: [240.240.0.2]
  ports: [{number: 7070, name: auto, protocol: ""}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.2}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: noaddr, namespace: ns1}
spec:
  hosts: [noaddr.example.com]
  ports: [{number: 9090, name: auto}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.3}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: vip, namespace: ns1}
spec:
  hosts: [vip.example.com]
  http:
  - match: [{uri: {prefix: /v2}}]
    route: [{destination: {host: other.example.com}}]
  - route: [{destination: {host: vip.example.com}}]
"#,
        "ns1",
    ));
    let push = w.push();
    let proxy = sidecar("ns1", &[]);
    let ls: Vec<Value> =
        generate_listeners(&push, &proxy, &[]).resources.iter().map(listener_summary).collect();
    let vip = by_name(&ls, "240.240.0.1_7070");
    assert_eq!(vip["listener_filters"], serde_json::json!(["envoy.filters.listener.http_inspector"]));
    let chains = vip["filter_chains"].as_array().unwrap();
    assert_eq!(chains.len(), 1, "{vip:#}");
    assert_eq!(chains[0]["application_protocols"], serde_json::json!(["http/1.1", "h2c"]));
    assert_eq!(chains[0]["filters"][0]["routes"]["rds"], "vip.example.com:7070");
    // Everything else: the default chain (a match-all chain in the list would never be reached by a
    // plaintext connection that is not HTTP).
    let tcp = &vip["default_filter_chain"];
    assert_eq!(tcp["application_protocols"].as_array().map(Vec::len), Some(0));
    assert_eq!(tcp["filters"][0]["target"]["cluster"], "outbound|7070||vip.example.com");
    let shared = by_name(&ls, "0.0.0.0_9090");
    assert_eq!(shared["filter_chains"][0]["filters"][0]["routes"]["rds"], "9090");
    assert_eq!(
        shared["default_filter_chain"]["filters"][0]["target"]["cluster"],
        "outbound|9090||noaddr.example.com"
    );

    let names = meshpilot_networking::rds::route_names(&push, &proxy);
    for n in ["9090", "other.example.com:7070", "vip.example.com:7070"] {
        assert!(names.iter().any(|x| x == n), "{n} in {names:?}");
    }
    assert!(!names.iter().any(|x| x == "7070"), "no shared table for VIP-bound sniffed ports: {names:?}");
    let routes = generate_routes(&push, &proxy, &["vip.example.com:7070".to_string(), "9090".to_string()]);
    let vip_table = &routes.resources[0];
    assert_eq!(vip_table.name, "vip.example.com:7070");
    assert_eq!(vip_table.virtual_hosts.len(), 1, "that service only, no catch-all: {vip_table:#?}");
    assert_eq!(vip_table.virtual_hosts[0].domains, ["*"]);
    assert_eq!(
        route_clusters(&vip_table.virtual_hosts[0]),
        ["outbound|7070||other.example.com", "outbound|7070||vip.example.com"]
    );
    let port_table = &routes.resources[1];
    assert!(
        port_table.virtual_hosts.iter().any(|v| v.domains.iter().any(|d| d == "noaddr.example.com")),
        "{port_table:#?}"
    );

    let clusters = generate_clusters(&push, &proxy, &[]).resources;
    let vip_cluster = clusters.iter().find(|c| c.name == "outbound|7070||vip.example.com").unwrap();
    let options = vip_cluster
        .typed_extension_protocol_options
        .get("envoy.extensions.upstreams.http.v3.HttpProtocolOptions")
        .map(|any| <HttpProtocolOptions as prost::Message>::decode(any.value.as_slice()).unwrap());
    assert!(
        matches!(
            options.and_then(|o| o.upstream_protocol_options),
            Some(UpstreamProtocolOptions::UseDownstreamProtocolConfig(_))
        ),
        "{vip_cluster:#?}"
    );
}
