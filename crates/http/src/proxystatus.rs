//! `/debug/proxystatusz` (meshpilot only): what `meshpilot proxy-status` prints, in one answer —
//! the control plane's name and version, and per connected proxy and per xDS type the sync status
//! Istio's CSDS (`pilot/pkg/xds/statusgen.go`, `debugSyncStatus`) reports, with the nonces,
//! versions, send time, counters and last NACK error behind it. Istio's `/debug/syncz` JSON has no
//! control-plane name and no versions (only nonces), hence this endpoint beside it.
//!
//! Shape:
//! ```json
//! {"controlPlane": {"id": "meshpilot-host", "version": "0.1.0"},
//!  "proxies": [{"proxy": "pod.ns", "connectionId": "pod.ns-1", "clusterId": "Kubernetes",
//!    "namespace": "ns", "proxyType": "sidecar", "istioVersion": "1.28.0", "address": "10.0.0.1:5000",
//!    "connectedAt": "RFC 3339", "protocol": "sotw", "polling": false, "lastPoll": null,
//!    "types": {"<type URL>": {"configStatus": "SYNCED", "watch": {"wildcard": true, "names": []},
//!      "nonceSent": "…", "nonceAcked": "…", "versionSent": "…", "versionAcked": "…",
//!      "sentTime": "RFC 3339", "lastError": "…", "responses": 3, "rejects": 0, "resources": 12}}}]}
//! ```
//! `configStatus` is Envoy's `ConfigStatus` name as Istio computes it: `ERROR` while the last
//! response of the type was NACKed (until an ACK), `NOT_SENT` before any response, `SYNCED` when
//! the acked nonce is the sent one, else `STALE`. A type the proxy does not watch has no entry
//! (istioctl's `IGNORED`).
//!
//! A proxy polling the REST-JSON endpoints (`xds::polling`) has `"protocol": "rest"`, `"polling": true`,
//! `lastPoll` its latest request and `connectedAt` its first; its ACKs and NACKs are inferred from the
//! version its next poll carries (it cannot send either), and the versions stand in for nonces.

use model::push::node::Proxy;
use serde_json::{Map, Value, json};
use xds::{ConnectionSnapshot, TypeStatus, debug::rfc3339_nano, source::Variant};

/// The control plane's name in `ISTIOD` columns: `pod_name` (`$POD_NAME`, as istiod's control-plane
/// identifier) when given and not blank, else `meshpilot-<hostname>` (`/proc/sys/kernel/hostname`,
/// then `hostname_var`, `$HOSTNAME`), else `meshpilot`. The binary computes it once at start.
pub fn control_plane_id(pod_name: Option<&str>, hostname_var: Option<&str>) -> String {
    if let Some(pod) = pod_name.map(str::trim).filter(|p| !p.is_empty()) {
        return pod.to_owned();
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| hostname_var.map(str::to_owned))
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty());
    host.map_or_else(|| "meshpilot".to_owned(), |h| format!("meshpilot-{h}"))
}

/// Istio's `debugSyncStatus`: `ERROR`, `NOT_SENT`, `SYNCED` or `STALE` (see the module docs), the
/// name of [`discovery::debug::config_status`] (what `istio.io/debug/syncz` sends).
pub fn config_status(t: &TypeStatus) -> &'static str {
    discovery::debug::config_status(t).as_str_name()
}

fn type_json(t: &TypeStatus) -> Value {
    json!({
        "configStatus": config_status(t),
        "watch": {"wildcard": t.watch.wildcard, "names": t.watch.names},
        "nonceSent": t.nonce_sent,
        "nonceAcked": t.nonce_acked,
        "versionSent": t.version_sent,
        "versionAcked": t.version_acked,
        "sentTime": t.last_send_time.map(|s| rfc3339_nano(Some(s))),
        "lastError": t.last_error,
        "responses": t.responses,
        "rejects": t.rejects,
        "resources": t.last_resources,
    })
}

fn proxy_json(c: &ConnectionSnapshot<Proxy>) -> Value {
    let types: Map<String, Value> = c.types.iter().map(|(url, t)| (url.clone(), type_json(t))).collect();
    json!({
        "proxy": c.proxy.id,
        "connectionId": c.id,
        "clusterId": c.proxy.metadata.cluster_id,
        "namespace": c.proxy.config_namespace,
        "proxyType": c.proxy.node_type.as_str(),
        "istioVersion": c.proxy.metadata.istio_version,
        "address": c.peer.map(|p| p.to_string()),
        "connectedAt": rfc3339_nano(Some(c.connected_at)),
        "protocol": c.protocol.as_str(),
        "polling": c.protocol == Variant::Rest,
        "lastPoll": c.last_poll.map(|t| rfc3339_nano(Some(t))),
        "types": types,
    })
}

/// The `/debug/proxystatusz` body for `connections`, sorted by proxy id then connection id.
pub fn proxystatusz(connections: &[ConnectionSnapshot<Proxy>], control_plane: &str) -> Value {
    let mut conns: Vec<&ConnectionSnapshot<Proxy>> = connections.iter().collect();
    conns.sort_by(|a, b| (&a.proxy.id, &a.id).cmp(&(&b.proxy.id, &b.id)));
    json!({
        "controlPlane": {"id": control_plane, "version": env!("CARGO_PKG_VERSION")},
        "proxies": conns.into_iter().map(proxy_json).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_status_follows_istio() {
        let mut t = TypeStatus::default();
        assert_eq!(config_status(&t), "NOT_SENT");
        t.nonce_sent = "n2".into();
        assert_eq!(config_status(&t), "STALE", "sent, never acked");
        t.nonce_acked = "n1".into();
        assert_eq!(config_status(&t), "STALE", "an older nonce acked");
        t.nonce_acked = "n2".into();
        assert_eq!(config_status(&t), "SYNCED");
        t.last_error = Some("bad route".into());
        assert_eq!(config_status(&t), "ERROR", "a NACK error wins");
    }

    #[test]
    fn control_plane_id_is_the_pod_name_or_the_host() {
        assert_eq!(control_plane_id(Some(" istiod-5f7c8 "), None), "istiod-5f7c8");
        for blank in [None, Some(""), Some("  ")] {
            let id = control_plane_id(blank, Some("node-a"));
            assert!(id.starts_with("meshpilot"), "{id}");
        }
    }

    #[test]
    fn empty_registry() {
        let v = proxystatusz(&[], "cp");
        assert_eq!(v["controlPlane"]["id"], "cp");
        assert_eq!(v["proxies"], json!([]));
    }
}
