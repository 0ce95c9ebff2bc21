//! The integration tests of `meshpilot`, one test binary (`cargo test -p <crate> --test it`);
//! each module was once its own binary. Modules under `peer` drive a real peer process (Envoy,
//! kube-apiserver, istiod or pilot-agent, Python grpcio, Chromium); `scripts/test.sh --pure`
//! skips them (`-- --skip peer::`).

mod cds_client;
mod istio_peer;
mod process;
mod webhook_support;

mod configz_cli;
mod disk_faults;
mod hostile_input;
mod validate_cli;

/// Tests that need a real peer process (see the crate doc above).
mod peer {
    mod analyze_cli;
    mod analyze_diff;
    mod apiserver_faults;
    mod chart_install;
    mod cluster_cli;
    mod config_status_cluster;
    mod configstatusz_cluster;
    mod conformance;
    mod connection_age;
    mod control_plane_dashboard;
    mod debug_http_istiod;
    mod dns_proxy;
    mod gateway_api_cluster;
    mod gateway_istiod;
    mod image;
    mod inject_cluster;
    mod inject_configmap;
    mod inject_files;
    mod inject_istiod;
    mod inject_proxyconfig;
    mod istioctl_xds;
    mod istiod_beside;
    mod kill9_load;
    mod kube_inject_istioctl;
    mod mcp_client;
    mod mcp_istiod;
    mod mesh_source;
    mod multicluster;
    mod multicluster_istiod;
    mod native_sidecars;
    mod process_faults;
    mod proxy_status_cli;
    mod remote_secret_istioctl;
    mod replicas;
    mod revision_tags;
    mod rolling_restart_istiod;
    mod secure_port;
    mod status_cli;
    mod telemetry_istiod;
    mod webhook_cluster;
}
