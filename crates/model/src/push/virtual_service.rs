//! How VirtualServices name the gateways they bind to (Istio's `resolveGatewayName` in
//! `pilot/pkg/model/virtualservice.go`).

/// The gateway name that stands for every sidecar in VirtualService `gateways` (`mesh`); a
/// VirtualService without `gateways` is bound to it.
pub const MESH_GATEWAY: &str = "mesh";

/// Istio's `resolveGatewayName`: `name` → `<namespace>/name`, `./name` → `<namespace>/name`, the
/// legacy `name.ns[.svc.cluster.local]` → `ns/name`; `ns/name` as is. `namespace` is the
/// VirtualService's.
pub fn resolve_gateway_name(gateway: &str, namespace: &str) -> String {
    match gateway.split_once('/') {
        Some((".", name)) => format!("{namespace}/{name}"),
        Some(_) => gateway.to_owned(),
        None => match gateway.split_once('.') {
            None => format!("{namespace}/{gateway}"),
            Some((name, rest)) => {
                let ns = rest.split_once('.').map_or(rest, |(ns, _)| ns);
                format!("{ns}/{name}")
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gateway_names_resolve_as_istio() {
        assert_eq!(resolve_gateway_name("gw", "ns"), "ns/gw");
        assert_eq!(resolve_gateway_name("./gw", "ns"), "ns/gw");
        assert_eq!(resolve_gateway_name("other/gw", "ns"), "other/gw");
        assert_eq!(resolve_gateway_name("gw.other.svc.cluster.local", "ns"), "other/gw");
        assert_eq!(resolve_gateway_name("gw.other", "ns"), "other/gw");
    }
}
