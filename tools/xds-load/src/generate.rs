//! `xds-load gen`: writes the synthetic mesh of a [`Layout`] as Istio config files.
//!
//! One file per namespace (`ns-<k>.yaml`: its ServiceEntries, WorkloadEntries, VirtualServices and
//! `Sidecar`), `istio-system.yaml` (an ingress `Gateway` for router streams) and the layout itself
//! (`.xds-load.json`). Existing `ns-*.yaml` files of an earlier run are replaced; other files are
//! left alone.

use std::{fmt::Write as _, path::Path};

use anyhow::Context as _;

use crate::layout::{LAYOUT_FILE, Layout};

/// Name of the ingress Gateway `gen` writes (`istio-system/ingress`, selector `istio: ingressgateway`,
/// port 80, hosts `*`).
pub const GATEWAY: &str = "istio-system/ingress";

/// The config of namespace `k` as one YAML stream.
pub fn namespace_yaml(layout: &Layout, k: u32) -> String {
    let ns = format!("ns-{k}");
    let mut out = String::new();
    let services = (0..layout.services).filter(|i| i % layout.namespaces.max(1) == k);
    for i in services {
        let host = layout.service_host(i);
        let _ = write!(
            out,
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata:\n  name: svc-{i}\n  namespace: {ns}\n\
             spec:\n  hosts: [{host}]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  ports:\n  \
             - {{name: http, number: 80, protocol: HTTP, targetPort: 8080}}\n  workloadSelector:\n    \
             labels: {{app: svc-{i}}}\n---\n"
        );
        if layout.virtual_services && i != 0 {
            let _ = write!(
                out,
                "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: svc-{i}\n  \
                 namespace: {ns}\nspec:\n  hosts: [{host}]\n  gateways: [mesh, {GATEWAY}]\n  http:\n  \
                 - match: [{{uri: {{prefix: /api/v{i}}}}}]\n    timeout: 5s\n    \
                 retries: {{attempts: 2, perTryTimeout: 2s, retryOn: 5xx}}\n    \
                 route: [{{destination: {{host: {host}, port: {{number: 80}}}}}}]\n  \
                 - route: [{{destination: {{host: {host}, port: {{number: 80}}}}}}]\n---\n"
            );
        }
    }
    for j in (0..layout.workloads).filter(|j| (j % layout.services.max(1)) % layout.namespaces.max(1) == k) {
        let s = j % layout.services.max(1);
        let ip = Layout::proxy_ip(j);
        let _ = write!(
            out,
            "apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata:\n  name: svc-{s}-{j}\n  \
             namespace: {ns}\nspec:\n  address: {ip}\n  serviceAccount: svc-{s}\n  \
             labels: {{app: svc-{s}, version: v1}}\n---\n"
        );
    }
    if layout.sidecar_scope {
        let _ = write!(
            out,
            "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata:\n  name: default\n  namespace: {ns}\n\
             spec:\n  egress:\n  - hosts: [\"./*\", \"istio-system/*\"]\n---\n"
        );
    }
    out
}

/// The `istio-system` config: the ingress Gateway.
pub fn istio_system_yaml() -> String {
    "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata:\n  name: ingress\n  namespace: istio-system\n\
     spec:\n  selector: {istio: ingressgateway}\n  servers:\n  \
     - port: {number: 80, name: http, protocol: HTTP}\n    hosts: [\"*\"]\n"
        .to_string()
}

/// Writes the layout's config into `dir` (created if missing).
///
/// # Errors
/// The directory or a file cannot be written.
pub fn write(layout: &Layout, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.starts_with("ns-") && name.ends_with(".yaml") {
            std::fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?;
        }
    }
    let put = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
    };
    for k in 0..layout.namespaces.max(1) {
        put(&format!("ns-{k}.yaml"), namespace_yaml(layout, k))?;
    }
    put("istio-system.yaml", istio_system_yaml())?;
    put(LAYOUT_FILE, serde_json::to_string_pretty(layout)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_holds_its_services_workloads_and_sidecar() {
        let layout =
            Layout { services: 4, namespaces: 2, workloads: 8, sidecar_scope: true, ..Layout::default() };
        let y = namespace_yaml(&layout, 1);
        assert!(y.contains("name: svc-1\n") && y.contains("name: svc-3\n") && !y.contains("name: svc-2\n"));
        assert!(y.contains("address: 10.1.0.2\n"), "workload 1 serves svc-1");
        assert!(y.contains("name: svc-3-7\n"));
        assert!(y.contains("kind: Sidecar"));
        assert_eq!(y.matches("kind: WorkloadEntry").count(), 4);
        assert!(!namespace_yaml(&layout, 0).contains("kind: VirtualService\nmetadata:\n  name: svc-0\n"));
    }
}
