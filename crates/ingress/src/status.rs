//! The addresses written to an Ingress's `status.loadBalancer.ingress` (Istio's `runningAddresses` and
//! `sliceToStatus`).
//!
//! With a mesh `ingressService` (default `istio-ingressgateway`, in the ingress namespace): an
//! `ExternalName` Service gives its external name; otherwise its `status.loadBalancer.ingress` entries
//! (the IP, or the host name when there is no IP), then its `spec.externalIPs`. A missing Service gives
//! no address. Without `ingressService`: the external IPs (`ExternalIP` addresses) of the node of the
//! first running gateway pod (pods in the ingress namespace labelled `istio: <selector>`). The
//! addresses become entries with `ip` (a valid IP address) or `hostname`, sorted by host name (empty for IPs: IPs first), then IP.
//!
//! Istio writes this status only for the Ingresses it processes, and only from the leader of the
//! `istio-leader` lock; the Kubernetes side (`kube_source::ingress_source`) does that.

use std::{collections::BTreeMap, net::IpAddr};

use crate::types::IngressLoadBalancerIngress;

/// The ingress Service, as far as its addresses go.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IngressService {
    /// `spec.type` (`LoadBalancer`, `ExternalName`, …).
    pub service_type: String,
    /// `spec.externalName`.
    pub external_name: String,
    /// `status.loadBalancer.ingress` as `(ip, hostname)`.
    pub load_balancer: Vec<(String, String)>,
    /// `spec.externalIPs`.
    pub external_ips: Vec<String>,
}

/// A gateway pod, for the node fallback.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GatewayPod {
    /// `status.phase`.
    pub phase: String,
    /// `spec.nodeName`.
    pub node_name: String,
}

/// The addresses of the ingress (see the module documentation). `service` is the ingress Service when
/// `ingressService` is set (`None`: not found); `pods` the gateway pods selected (used only without
/// `ingressService`), `node_external_ips` the `ExternalIP` addresses of every node by name.
pub fn running_addresses(
    ingress_service_set: bool,
    service: Option<&IngressService>,
    pods: &[GatewayPod],
    node_external_ips: &BTreeMap<String, Vec<String>>,
) -> Vec<String> {
    if ingress_service_set {
        let Some(svc) = service else { return Vec::new() };
        if svc.service_type == "ExternalName" {
            return vec![svc.external_name.clone()];
        }
        let mut out: Vec<String> = svc
            .load_balancer
            .iter()
            .map(|(ip, host)| if ip.is_empty() { host.clone() } else { ip.clone() })
            .collect();
        out.extend(svc.external_ips.iter().cloned());
        return out;
    }
    for pod in pods.iter().filter(|p| p.phase == "Running") {
        let Some(ips) = node_external_ips.get(&pod.node_name) else { continue };
        let mut out: Vec<String> = Vec::new();
        for ip in ips {
            if !ip.is_empty() && !out.contains(ip) {
                out.push(ip.clone());
            }
        }
        return out;
    }
    Vec::new()
}

/// The `status.loadBalancer.ingress` entries for `addresses`: an IP address as `ip`, anything else as
/// `hostname`, sorted by host name (empty for IPs, so IPs first) then IP (stable).
pub fn load_balancer_status(addresses: &[String]) -> Vec<IngressLoadBalancerIngress> {
    let mut out: Vec<IngressLoadBalancerIngress> = addresses
        .iter()
        .map(|a| {
            if a.parse::<IpAddr>().is_ok() {
                IngressLoadBalancerIngress { ip: a.clone(), ..Default::default() }
            } else {
                IngressLoadBalancerIngress { hostname: a.clone(), ..Default::default() }
            }
        })
        .collect();
    out.sort_by(|a, b| a.hostname.cmp(&b.hostname).then_with(|| a.ip.cmp(&b.ip)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_addresses_then_external_ips_sorted_ips_first() {
        let svc = IngressService {
            service_type: "LoadBalancer".into(),
            load_balancer: vec![("10.0.0.2".into(), String::new()), (String::new(), "lb.example.com".into())],
            external_ips: vec!["10.0.0.1".into()],
            ..IngressService::default()
        };
        let addrs = running_addresses(true, Some(&svc), &[], &BTreeMap::new());
        assert_eq!(addrs, ["10.0.0.2", "lb.example.com", "10.0.0.1"]);
        let status = load_balancer_status(&addrs);
        let shown: Vec<(&str, &str)> = status.iter().map(|s| (s.hostname.as_str(), s.ip.as_str())).collect();
        assert_eq!(shown, [("", "10.0.0.1"), ("", "10.0.0.2"), ("lb.example.com", "")]);
        assert!(running_addresses(true, None, &[], &BTreeMap::new()).is_empty());
        let ext = IngressService {
            service_type: "ExternalName".into(),
            external_name: "edge.example".into(),
            ..svc
        };
        assert_eq!(running_addresses(true, Some(&ext), &[], &BTreeMap::new()), ["edge.example"]);
    }

    #[test]
    fn without_a_service_the_node_of_the_first_running_pod_counts() {
        let pods = [
            GatewayPod { phase: "Pending".into(), node_name: "n1".into() },
            GatewayPod { phase: "Running".into(), node_name: "n2".into() },
        ];
        let nodes = BTreeMap::from([
            ("n1".to_string(), vec!["1.1.1.1".to_string()]),
            ("n2".to_string(), vec!["2.2.2.2".to_string(), "2.2.2.2".to_string()]),
        ]);
        assert_eq!(running_addresses(false, None, &pods, &nodes), ["2.2.2.2"]);
    }
}
