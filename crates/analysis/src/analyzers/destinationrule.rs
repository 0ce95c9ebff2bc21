//! `destinationrule`: TLS settings without server verification, and subsets selecting no pod
//! (Istio's `pkg/config/analysis/analyzers/destinationrule`).

use std::collections::BTreeMap;

use api::{
    Kind, Spec,
    networking::destination_rule::{ClientTlsSettings, client_tls_settings::TlSmode},
};

use crate::{
    Context, Message, Resource,
    analyzers::Analyzer,
    msg::{self, Arg},
    resource::kinds,
    util,
};

/// Checks that a DestinationRule originating TLS (`SIMPLE` or `MUTUAL`) sets `caCertificates` to
/// verify the server, unless it uses a `credentialName` with a `workloadSelector`: IST0128 at the
/// traffic policy level, IST0129 per port-level setting.
pub struct CaCertificateAnalyzer;

/// The TLS mode's name when it is SIMPLE or MUTUAL and the server goes unverified.
fn unverified(tls: Option<&ClientTlsSettings>, has_workload_selector: bool) -> Option<&'static str> {
    let tls = tls?;
    let mode = match tls.mode {
        m if m == TlSmode::Simple as i32 => "SIMPLE",
        m if m == TlSmode::Mutual as i32 => "MUTUAL",
        _ => return None,
    };
    let exempt = !tls.credential_name.is_empty() && has_workload_selector;
    (tls.ca_certificates.is_empty() && !exempt).then_some(mode)
}

impl Analyzer for CaCertificateAnalyzer {
    fn name(&self) -> &str {
        "destinationrule.CaCertificateAnalyzer"
    }
    fn description(&self) -> &str {
        "Checks if caCertificates is set when TLS mode is SIMPLE/MUTUAL"
    }
    fn inputs(&self) -> &[&'static str] {
        &[kinds::DESTINATION_RULE]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        for r in ctx.istio(Kind::DestinationRule) {
            let Spec::DestinationRule(dr) = r.spec() else { continue };
            let name = util::full_name(r.namespace(), r.name());
            let selector = dr.workload_selector.is_some();
            let policy = dr.traffic_policy.as_ref();
            if let Some(mode) = unverified(policy.and_then(|p| p.tls.as_ref()), selector) {
                let args = [Arg::from(&name), Arg::from(r.namespace()), Arg::from(mode), Arg::from(&dr.host)];
                let path = "spec.trafficPolicy.tls.caCertificates";
                out.push(r.message_at(
                    &msg::NO_SERVER_CERTIFICATE_VERIFICATION_DESTINATION_LEVEL,
                    &args,
                    path,
                ));
            }
            for (i, p) in
                policy.map(|p| p.port_level_settings.as_slice()).unwrap_or_default().iter().enumerate()
            {
                if let Some(mode) = unverified(p.tls.as_ref(), selector) {
                    // Go prints the port selector in protobuf text form.
                    let port = p.port.as_ref().map_or(String::new(), |p| format!("number:{}", p.number));
                    let args = [
                        Arg::from(&name),
                        Arg::from(r.namespace()),
                        Arg::from(mode),
                        Arg::from(&dr.host),
                        Arg::Str(port),
                    ];
                    let path = format!("spec.trafficPolicy.portLevelSettings[{i}].tls.caCertificates");
                    out.push(r.message_at(&msg::NO_SERVER_CERTIFICATE_VERIFICATION_PORT_LEVEL, &args, &path));
                }
            }
        }
    }
}

/// Checks that a DestinationRule's host is a known service (IST0174) and that each subset's labels
/// (with the ServiceEntry's workload selector) select at least one pod, whose labels include the
/// topology labels of its node (region, zone, subzone, hostname): IST0173.
pub struct PodNotSelectedAnalyzer;

const TOPOLOGY_REGION: &str = "topology.kubernetes.io/region";
const TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";
const TOPOLOGY_SUBZONE: &str = "topology.istio.io/subzone";
const HOSTNAME: &str = "kubernetes.io/hostname";

impl Analyzer for PodNotSelectedAnalyzer {
    fn name(&self) -> &str {
        "destinationrule.SubsetSelectPodAnalyzer"
    }
    fn type_name(&self) -> &str {
        "destinationrule.PodNotSelectedAnalyzer"
    }
    fn description(&self) -> &str {
        "Checks if pods are selected by subsets in destination rules."
    }
    fn inputs(&self) -> &[&'static str] {
        &[kinds::DESTINATION_RULE, kinds::POD, kinds::SERVICE, kinds::SERVICE_ENTRY, kinds::NODE]
    }

    fn analyze(&self, ctx: &Context<'_>, out: &mut Vec<Message>) {
        let services = util::service_entry_host_map(ctx);
        // Pods' labels with their node's topology labels (Istio's AugmentLabels).
        let pods: Vec<BTreeMap<String, String>> = ctx
            .kube(kinds::POD)
            .map(|pod| {
                let mut labels = pod.labels.clone();
                let node = pod.pointer("/spec/nodeName").and_then(serde_json::Value::as_str).unwrap_or("");
                if let Some(n) = ctx.find_kube(kinds::NODE, "", node).filter(|_| !node.is_empty()) {
                    for key in [TOPOLOGY_REGION, TOPOLOGY_ZONE, TOPOLOGY_SUBZONE] {
                        if let Some(v) = n.labels.get(key).filter(|v| !v.is_empty()) {
                            labels.insert(key.to_string(), v.clone());
                        }
                    }
                }
                if !node.is_empty() {
                    labels.insert(HOSTNAME.to_string(), node.to_string());
                }
                labels
            })
            .collect();
        for r in ctx.istio(Kind::DestinationRule) {
            let Spec::DestinationRule(dr) = r.spec() else { continue };
            let Some(service) = util::destination_host(r.namespace(), &dr.export_to, &dr.host, &services)
            else {
                out.push(r.message(&msg::UNKNOWN_DESTINATION_RULE_HOST, &[Arg::from(&dr.host)]));
                continue;
            };
            for subset in &dr.subsets {
                let mut selector = service.workload_selector.clone();
                selector.extend(subset.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
                if !pods.iter().any(|labels| util::selector_matches(&selector, labels)) {
                    out.push(
                        r.message(&msg::DESTINATION_RULE_SUBSET_NOT_SELECT_PODS, &[Arg::from(&subset.name)]),
                    );
                }
            }
        }
    }
}
