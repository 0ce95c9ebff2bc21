//! Istio-shaped JSON for the debug endpoints that read connection state: `/debug/syncz` and
//! `/debug/adsz` (`pilot/pkg/xds/debug.go`: `SyncStatus`, `ResourceStatus`, `AdsClients`,
//! `AdsClient`), from the xDS engine's [`ConnectionSnapshot`]s of meshpilot's node type ([`Proxy`]);
//! `istioctl proxy-status` reads the syncz shape.
//!
//! Field names and omission rules follow Istio's Go structs: `omitempty` strings are left out when
//! empty, and times are RFC 3339 with nanoseconds (a missing send time is Go's zero time
//! `0001-01-01T00:00:00Z`). `*_sent`/`*_acked` hold **nonces**, as in Istio: a proxy is in sync for a
//! type when the two are equal. Where meshpilot differs: adsz `metadata` holds only the keys meshpilot
//! models ([`NodeMetadata::to_json`](model::push::node::NodeMetadata::to_json)) and `labels` are the `LABELS` metadata.

use model::push::node::Proxy;
use serde_json::{Map, Value as Json, json};
use xds::{
    ConnectionSnapshot,
    debug::rfc3339_nano,
    type_url::{CLUSTER, ENDPOINT, EXTENSION_CONFIG, LISTENER, ROUTE},
};

/// `/debug/syncz`: one `SyncStatus` per connection whose proxy's config namespace is `namespace`
/// (all when `None`), sorted by cluster id, namespace and proxy id.
pub fn syncz(connections: &[ConnectionSnapshot<Proxy>], namespace: Option<&str>) -> Json {
    let mut conns: Vec<&ConnectionSnapshot<Proxy>> =
        connections.iter().filter(|c| namespace.is_none_or(|ns| c.proxy.config_namespace == ns)).collect();
    conns.sort_by(|a, b| sort_key(a).cmp(&sort_key(b)));
    Json::Array(conns.into_iter().map(sync_status).collect())
}

fn sort_key(c: &ConnectionSnapshot<Proxy>) -> (&str, &str, &str, &str) {
    (&c.proxy.metadata.cluster_id, &c.proxy.config_namespace, &c.proxy.id, &c.id)
}

fn sync_status(c: &ConnectionSnapshot<Proxy>) -> Json {
    let mut out = Map::new();
    put(&mut out, "cluster_id", &c.proxy.metadata.cluster_id);
    put(&mut out, "proxy", &c.proxy.id);
    put(&mut out, "proxy_type", c.proxy.node_type.as_str());
    put(&mut out, "istio_version", &c.proxy.metadata.istio_version);
    for (prefix, type_url) in [
        ("cluster", CLUSTER),
        ("listener", LISTENER),
        ("route", ROUTE),
        ("endpoint", ENDPOINT),
        ("extensionconfig", EXTENSION_CONFIG),
    ] {
        if let Some(t) = c.types.get(type_url) {
            put(&mut out, &format!("{prefix}_sent"), &t.nonce_sent);
            put(&mut out, &format!("{prefix}_acked"), &t.nonce_acked);
        }
    }
    if !c.types.is_empty() {
        let resources: Map<String, Json> = c
            .types
            .iter()
            .map(|(type_url, t)| {
                let mut r = Map::new();
                put(&mut r, "sent", &t.nonce_sent);
                put(&mut r, "acked", &t.nonce_acked);
                r.insert("sentTime".into(), Json::String(rfc3339_nano(t.last_send_time)));
                put(&mut r, "lastError", t.last_error.as_deref().unwrap_or(""));
                (type_url.clone(), Json::Object(r))
            })
            .collect();
        out.insert("resources".into(), Json::Object(resources));
    }
    Json::Object(out)
}

/// `/debug/adsz`: `{"totalClients": n, "clients": [...]}` for the given connections, sorted by
/// cluster id, namespace and proxy id.
pub fn adsz(connections: &[ConnectionSnapshot<Proxy>]) -> Json {
    let mut conns: Vec<&ConnectionSnapshot<Proxy>> = connections.iter().collect();
    conns.sort_by(|a, b| sort_key(a).cmp(&sort_key(b)));
    let mut out = Map::new();
    out.insert("totalClients".into(), json!(conns.len()));
    if !conns.is_empty() {
        out.insert("clients".into(), Json::Array(conns.into_iter().map(ads_client).collect()));
    }
    Json::Object(out)
}

/// The connection a `proxyID` debug query means: the first whose connection id contains it
/// (Istio's `getProxyConnection`).
pub fn find_connection<'a, N>(
    connections: &'a [ConnectionSnapshot<N>],
    proxy_id: &str,
) -> Option<&'a ConnectionSnapshot<N>> {
    connections.iter().find(|c| c.id.contains(proxy_id))
}

fn ads_client(c: &ConnectionSnapshot<Proxy>) -> Json {
    let mut out = Map::new();
    out.insert("connectionId".into(), Json::String(c.id.clone()));
    out.insert("connectedAt".into(), Json::String(rfc3339_nano(Some(c.connected_at))));
    out.insert(
        "address".into(),
        Json::String(c.peer.map_or_else(|| "0.0.0.0".to_owned(), |p| p.to_string())),
    );
    let labels = &c.proxy.metadata.labels;
    if !labels.is_empty() {
        out.insert(
            "labels".into(),
            Json::Object(labels.iter().map(|(k, v)| (k.clone(), Json::String(v.clone()))).collect()),
        );
    }
    out.insert("metadata".into(), Json::Object(c.proxy.metadata.to_json()));
    let mut locality = Map::new();
    put(&mut locality, "region", &c.proxy.locality.region);
    put(&mut locality, "zone", &c.proxy.locality.zone);
    put(&mut locality, "sub_zone", &c.proxy.locality.sub_zone);
    out.insert("locality".into(), Json::Object(locality));
    if !c.types.is_empty() {
        let watches: Map<String, Json> = c
            .types
            .iter()
            .map(|(type_url, t)| {
                (type_url.clone(), Json::Array(t.watch.names.iter().cloned().map(Json::String).collect()))
            })
            .collect();
        out.insert("watches".into(), Json::Object(watches));
    }
    Json::Object(out)
}

fn put(out: &mut Map<String, Json>, key: &str, value: &str) {
    if !value.is_empty() {
        out.insert(key.to_owned(), Json::String(value.to_owned()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::push::node::NodeMetadata;
    use std::{
        collections::BTreeMap,
        sync::Arc,
        time::{Duration, UNIX_EPOCH},
    };
    use xds::{
        SyncState, TypeStatus,
        source::{Variant, Watch},
    };

    fn conn(id: &str, ns: &str, types: BTreeMap<String, TypeStatus>) -> ConnectionSnapshot<Proxy> {
        let meta = NodeMetadata::from_json(
            json!({"NAMESPACE": ns, "CLUSTER_ID": "Kubernetes", "ISTIO_VERSION": "1.28.0", "LABELS": {"app": "a"}})
                .as_object()
                .unwrap()
                .clone(),
        )
        .unwrap();
        let proxy = Proxy::parse(&format!("sidecar~10.0.0.1~{id}~{ns}.svc.cluster.local"), meta).unwrap();
        ConnectionSnapshot {
            id: format!("{id}-1"),
            proxy: Arc::new(proxy),
            peer: Some("127.0.0.1:5555".parse().unwrap()),
            connected_at: UNIX_EPOCH + Duration::from_secs(86_400),
            protocol: Variant::Sotw,
            types,
            last_poll: None,
        }
    }

    #[test]
    fn syncz_has_istios_shape() {
        let mut types = BTreeMap::new();
        types.insert(
            CLUSTER.to_owned(),
            TypeStatus {
                watch: Watch::wildcard().into(),
                state: SyncState::Acked,
                nonce_sent: "n1".into(),
                nonce_acked: "n1".into(),
                last_send_time: Some(UNIX_EPOCH + Duration::from_secs(1)),
                ..TypeStatus::default()
            },
        );
        types.insert(
            ROUTE.to_owned(),
            TypeStatus {
                watch: Watch::names(["r"]).into(),
                state: SyncState::Rejected,
                nonce_sent: "n3".into(),
                nonce_acked: "n2".into(),
                last_error: Some("missing ): /foo(".into()),
                ..TypeStatus::default()
            },
        );
        let conns = vec![conn("b.ns2", "ns2", BTreeMap::new()), conn("a.ns1", "ns1", types)];
        let v = syncz(&conns, None);
        assert_eq!(
            v[0],
            json!({
                "cluster_id": "Kubernetes", "proxy": "a.ns1", "proxy_type": "sidecar", "istio_version": "1.28.0",
                "cluster_sent": "n1", "cluster_acked": "n1", "route_sent": "n3", "route_acked": "n2",
                "resources": {
                    CLUSTER: {"sent": "n1", "acked": "n1", "sentTime": "1970-01-01T00:00:01Z"},
                    ROUTE: {"sent": "n3", "acked": "n2", "sentTime": "0001-01-01T00:00:00Z", "lastError": "missing ): /foo("}
                }
            })
        );
        assert_eq!(v[1]["proxy"], "b.ns2");
        assert_eq!(syncz(&conns, Some("ns2")).as_array().unwrap().len(), 1);
    }

    #[test]
    fn adsz_has_istios_shape() {
        let mut types = BTreeMap::new();
        types.insert(
            ENDPOINT.to_owned(),
            TypeStatus { watch: Watch::names(["x", "y"]).into(), ..TypeStatus::default() },
        );
        types.insert(
            LISTENER.to_owned(),
            TypeStatus { watch: Watch::wildcard().into(), ..TypeStatus::default() },
        );
        let conns = vec![conn("a.ns1", "ns1", types)];
        assert_eq!(
            adsz(&conns),
            json!({"totalClients": 1, "clients": [{
                "connectionId": "a.ns1-1", "connectedAt": "1970-01-02T00:00:00Z", "address": "127.0.0.1:5555",
                "labels": {"app": "a"},
                "metadata": {"ISTIO_VERSION": "1.28.0", "LABELS": {"app": "a"}, "NAMESPACE": "ns1", "CLUSTER_ID": "Kubernetes"},
                "locality": {},
                "watches": {ENDPOINT: ["x", "y"], LISTENER: []}
            }]})
        );
        assert_eq!(adsz(&[]), json!({"totalClients": 0}));
        assert_eq!(find_connection(&conns, "a.ns1").unwrap().id, "a.ns1-1");
        assert!(find_connection(&conns, "zzz").is_none());
    }
}
