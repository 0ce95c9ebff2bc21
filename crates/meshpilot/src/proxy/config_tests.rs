use super::*;

#[test]
fn render_config_names_istio_objects() {
    assert_eq!(
        render_config("/apis/networking.istio.io/v1/namespaces/default/virtual-service/reviews"),
        "reviews.default"
    );
    assert_eq!(render_config(""), "");
    assert_eq!(render_config("/apis/gateway.networking.k8s.io/v1/namespaces/a/http-route/b"), "<unknown>");
    assert_eq!(render_config("/apis/networking.istio.io/v1/namespaces/x"), "");
}

#[test]
fn clusters_table_splits_istio_names() {
    let clusters = vec![
        json!({"name": "outbound|9080|v1|reviews.default.svc.cluster.local", "type": "EDS",
               "config": "/apis/networking.istio.io/v1/namespaces/default/destination-rule/reviews"}),
        json!({"name": "outbound|9080||reviews.default.svc.cluster.local", "type": "EDS"}),
        json!({"name": "BlackHoleCluster", "type": "STATIC"}),
    ];
    assert_eq!(
        render_clusters(&clusters),
        "SERVICE FQDN                          PORT     SUBSET     DIRECTION     TYPE       DESTINATION RULE\n\
         reviews.default.svc.cluster.local     9080     v1         outbound      EDS        reviews.default\n\
         reviews.default.svc.cluster.local     9080     -          outbound      EDS        \n\
         BlackHoleCluster                      -        -          -             STATIC     \n"
    );
}

#[test]
fn cluster_filters_and_order() {
    let dump = json!({"clusters": [
        {"name": "outbound|80||b.svc", "type": "EDS"},
        {"name": "outbound|80|v1|a.svc", "type": "EDS"},
        {"name": "outbound|81||a.svc", "type": "EDS"},
        {"name": "inbound|80||", "type": "STATIC"},
    ]});
    let args =
        |fqdn: Option<&str>, port: Option<u32>, subset: Option<&str>, direction: Option<&str>| ClusterArgs {
            common: Common {
                proxy: "p".into(),
                namespace: None,
                output: Output::Short,
                addr: AddrArgs { addr: "x".into() },
            },
            fqdn: fqdn.map(Into::into),
            port,
            subset: subset.map(Into::into),
            direction: direction.map(Into::into),
        };
    let names =
        |items: Vec<Value>| items.iter().map(|c| c["name"].as_str().unwrap().to_owned()).collect::<Vec<_>>();
    // Sorted by FQDN, subset, port, direction ("inbound|80||" has an empty FQDN).
    assert_eq!(
        names(clusters(&dump, &args(None, None, None, None))),
        ["inbound|80||", "outbound|81||a.svc", "outbound|80|v1|a.svc", "outbound|80||b.svc"]
    );
    assert_eq!(names(clusters(&dump, &args(Some("a.svc"), Some(80), None, None))), ["outbound|80|v1|a.svc"]);
    assert_eq!(names(clusters(&dump, &args(None, None, Some("v1"), None))), ["outbound|80|v1|a.svc"]);
    assert_eq!(names(clusters(&dump, &args(None, None, None, Some("inbound")))), ["inbound|80||"]);
}

#[test]
fn listener_rows_describe_matches_and_destinations() {
    let listeners = vec![json!({
        "name": "0.0.0.0_8080", "address": "0.0.0.0:8080",
        "filter_chains": [
            {"server_names": [], "destination_port": null, "transport_protocol": "", "application_protocols": [],
             "prefix_ranges": [], "filters": [{"name": HCM, "routes": {"rds": "8080"}}]},
            {"server_names": ["a.example.com"], "destination_port": 8080, "transport_protocol": "tls",
             "application_protocols": ["istio-peer-exchange", "istio"], "prefix_ranges": ["10.0.0.0/8"],
             "filters": [{"name": TCP_PROXY, "target": {"cluster": "outbound|8080||a.svc"}}]},
        ],
        "default_filter_chain": {"filters": [{"name": TCP_PROXY, "target": {"cluster": "PassthroughCluster"}}]},
    })];
    assert_eq!(
        render_listeners(&listeners),
        "ADDRESSES     PORT     MATCH                                                                   DESTINATION\n\
         0.0.0.0       8080     ALL                                                                     Route: 8080\n\
         0.0.0.0       8080     ALL                                                                     PassthroughCluster\n\
         0.0.0.0       8080     SNI: a.example.com; Trans: tls; App: TCP TLS; Addr: 10.0.0.0/8:8080     Cluster: outbound|8080||a.svc\n"
    );
    assert_eq!(listener_type(&listeners[0]), "HTTP+TCP");
}

#[test]
fn black_hole_tcp_is_not_a_destination() {
    let chain = json!({"filters": [{"name": TCP_PROXY, "target": {"cluster": "BlackHoleCluster"}}]});
    assert_eq!(chain_destination(&chain), "Non-HTTP/Non-TCP");
    let inline = json!({"filters": [{"name": HCM, "routes": {"inline": {"name": "x", "virtual_hosts": [
        {"name": "v", "domains": ["*"], "routes": [{"match": {"prefix": "/"}, "action": {"cluster": "inbound|80||"}}]}
    ]}}}]});
    assert_eq!(chain_destination(&inline), "Cluster: inbound|80||");
}

#[test]
fn route_rows_name_the_virtual_service() {
    let routes = vec![json!({"name": "9080", "virtual_hosts": [
        {"name": "reviews.default.svc.cluster.local:9080",
         "domains": ["reviews.default.svc.cluster.local", "reviews.default", "reviews.default.svc.cluster.local:9080", "10.0.0.1"],
         "routes": [
            {"match": {"prefix": "/api"}, "action": {"cluster": "outbound|9080|v1|reviews.default.svc.cluster.local"},
             "config": "/apis/networking.istio.io/v1/namespaces/default/virtual-service/reviews"},
            {"match": {"path": "/exact"}, "action": {"cluster": "outbound|9080||reviews.default.svc.cluster.local"}},
         ]},
        {"name": "allow_any", "domains": ["*"], "routes": [{"match": {"prefix": "/"}, "action": {"cluster": "PassthroughCluster"}}]},
        {"name": "empty", "domains": ["e"], "routes": []},
    ]})];
    assert_eq!(
        render_routes(&routes),
        "NAME     VHOST NAME                                 DOMAINS                       MATCH      VIRTUAL SERVICE\n\
         9080     reviews.default.svc.cluster.local:9080     reviews.default, 10.0.0.1     /api*      reviews.default\n\
         9080     reviews.default.svc.cluster.local:9080     reviews.default, 10.0.0.1     /exact     \n\
         9080     empty                                      e                             /*         404\n"
    );
}

#[test]
fn route_domains_like_istioctl() {
    assert_eq!(route_domains(&[]), "");
    assert_eq!(route_domains(&["a:80"]), "a:80");
    assert_eq!(route_domains(&["a.ns.svc.cluster.local", "a.ns.svc", "a.ns", "a"]), "a.ns, a");
    assert_eq!(route_domains(&["a", "b", "c", "d:1"]), "a, b + 1 more...");
    assert_eq!(route_match(&json!({"regex": "/x.*"})), "regex /x.*");
    assert_eq!(route_match(&json!({"path_separated_prefix": "/p"})), "PathPrefix:/p");
}

#[test]
fn endpoint_rows_sorted_and_filtered() {
    let dump = json!({
        "endpoints": [{"cluster_name": "outbound|80||b.svc", "localities": [{"endpoints": [
            {"address": "10.0.0.2:80", "health": "UNKNOWN"}, {"address": "10.0.0.1:80", "health": "DRAINING"}]}]}],
        "clusters": [{"name": "static", "endpoints": [{"endpoints": [{"address": "127.0.0.1:15000", "health": "HEALTHY"}]}]}],
    });
    let args = |cluster: Option<&str>| EndpointArgs {
        common: Common {
            proxy: "p".into(),
            namespace: None,
            output: Output::Short,
            addr: AddrArgs { addr: "x".into() },
        },
        cluster: cluster.map(Into::into),
        address: None,
        port: None,
        status: None,
    };
    let rows = endpoints(&dump, &args(None));
    assert_eq!(
        render_endpoints(&rows),
        "ENDPOINT            STATUS       OUTLIER CHECK     CLUSTER\n\
         10.0.0.1:80         DRAINING     -                 outbound|80||b.svc\n\
         10.0.0.2:80         HEALTHY      -                 outbound|80||b.svc\n\
         127.0.0.1:15000     HEALTHY      -                 static\n"
    );
    assert_eq!(
        endpoints(&dump, &args(Some("STATIC"))).len(),
        1,
        "cluster filter is case-insensitive and exact"
    );
}

#[test]
fn connection_counters_are_read_from_the_id() {
    assert_eq!(counter("x.ns-12"), 12);
}
