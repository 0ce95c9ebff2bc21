//! meshpilot's Kubernetes side.
//!
//! ```text
//!  kube-apiserver ◄──watch CRDs + Istio kinds── source::KubeSource ──► ConfigStoreController
//!        ▲                                            (same parsing/validation as files)
//!        ├──watch Services, EndpointSlices, Pods, Nodes, Namespaces── registry::KubeRegistry ──► ServiceController
//!        └──REST (create/apply/get/list/delete)── client ◄── meshpilot apply/create/get/delete
//! ```
//!
//! - [`client`]: the API client: connecting (kubeconfig, `KUBECONFIG`, in-cluster), watches and their
//!   backoff, CRD facts, REST calls on Istio custom resources as dynamic objects, conversion into
//!   [`model::Config`], errors explained.
//! - [`source`]: [`KubeSource`], the CRD config source (Istio's crdclient): watches, validation,
//!   relist without spurious deletes, writes with typed conflicts.
//! - [`registry`]: [`KubeRegistry`], the Kubernetes service registry (Istio's kube controller):
//!   Services and EndpointSlices as services and endpoints, Pods for labels, identities and proxy
//!   instances, Nodes for locality.
//! - [`gateway_deployment`]: the automated deployment of Gateway API Gateways of class `istio`
//!   (ServiceAccount, Deployment, Service server-side applied by the leader of
//!   `istio-gateway-deployment-<rev>`; the GatewayClass `istio` created when absent).
//! - [`gateway_objects`]: Namespaces (labels), Secret names and Service load-balancer addresses for the
//!   Gateway API converter (`gateway::KubeObjects`).
//! - [`gateway_status`]: the status of Gateway API objects as Istio writes it (conditions merged with
//!   the live ones, no write when unchanged), written by the leader of `istio-gateway-status-leader-<rev>`.
//! - [`ingress_source`]: [`ingress_source::IngressSource`], Kubernetes Ingresses as Gateways and VirtualServices
//!   (Istio's ingress controller, conversion in `meshpilot-ingress`) and the Ingress status writer; the
//!   feed of a read-only `config::ReadOnlySource`.
//! - [`namespaces`]: the mesh config's `discoverySelectors` as a namespace filter, shared by both.
//! - [`nodes`]: the Nodes' kubelet versions, for the injection webhook's `ENABLE_NATIVE_SIDECARS=auto`.
//! - [`leader`]: leader election on a Lease with Istio's lock names (one replica writes status,
//!   runs analysis, deploys gateways).
//! - [`status`]: writing `status.validationMessages` and the `Reconciled` condition (merge patches of
//!   the status subresource, no write when unchanged), listing Kubernetes kinds for analysis.
//! - [`secrets`]: the cluster's Secrets for `credentialName` SDS secrets (Istio's credentials
//!   controller watch, `data` only, handed to `meshpilot-sds`).
//! - [`remote_kubeconfig`]: remote kubeconfigs (multi-cluster Secrets) as untrusted input: validated,
//!   insecure options (exec, auth providers, token and certificate files) refused unless
//!   `PILOT_INSECURE_MULTICLUSTER_KUBECONFIG_OPTIONS` allows them (istiod's `sanitizeKubeConfig`).
//! - [`remote_secret`]: the Secret of `meshpilot create-remote-secret` (istioctl's: the reader service
//!   account's token and the API server in a kubeconfig, labelled `istio/multiCluster`).
//! - [`relist`]: the list-and-watch bookkeeping every watch above goes through (initial list,
//!   relist diff, sync).
//! - `testenv` (cargo feature `testing`, for tests and examples only): a real etcd + kube-apiserver
//!   (`scripts/kube-testenv.sh`).
//!
//! Keeps `kube` and `k8s-openapi` out of the other crates.

pub mod client;
pub mod configmap_watch;
pub mod gateway_deployment;
pub mod gateway_objects;
pub mod gateway_status;
pub mod identity;
pub mod ingress_source;
pub mod injector_webhook_config;
pub mod ip_autoallocate;
pub mod leader;
pub mod multicluster;
pub mod namespaces;
pub mod nodes;
pub mod object;
pub mod registry;
pub mod relist;
pub mod remote_kubeconfig;
pub mod remote_secret;
pub mod secrets;
pub mod source;
pub mod status;
#[cfg(feature = "testing")]
pub mod testenv;
pub mod webhook_config;

pub use client::{
    AccessEnv, Cluster, ClusterAccess, Connection, KubeError, Resolved, client_config, connect,
    kind_from_word, resolve_access,
};
pub use model::selector::DiscoverySelectors;
pub use multicluster::{Multicluster, MulticlusterOptions};
pub use namespaces::NamespaceFilter;
pub use registry::{KubeRegistry, KubeRegistryOptions};
pub use source::{KubeSource, KubeSourceOptions, Rejected};

/// Re-exported: the client type of [`Connection`].
pub use kube::Client;
/// Re-exported so callers can hold a client configuration without depending on `kube`.
pub use kube::Config as ClientConfig;
