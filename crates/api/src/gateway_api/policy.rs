//! ReferenceGrant, BackendTLSPolicy and XBackendTrafficPolicy.

use std::collections::BTreeMap;

use super::{LocalPolicyTargetReference, SessionPersistence};

object! {
    /// `ReferenceGrant.spec` (`gateway.networking.k8s.io/v1beta1`): lets objects of other namespaces
    /// refer to objects of this namespace. Without one, Istio refuses a cross-namespace backendRef
    /// (`ResolvedRefs: False`, reason `RefNotPermitted`) or certificateRef.
    pub struct ReferenceGrantSpec {
        /// Who may refer (group, kind, namespace). Required.
        pub from: Vec<ReferenceGrantFrom>,
        /// What may be referred to in this namespace (group, kind, optional name). Required.
        pub to: Vec<ReferenceGrantTo>,
    }
}

object! {
    /// A referring group, kind and namespace of a ReferenceGrant.
    pub struct ReferenceGrantFrom {
        /// API group (`gateway.networking.k8s.io`; `""` for the core group).
        pub group: String,
        /// Kind (`HTTPRoute`, `Gateway`, …).
        pub kind: String,
        /// Namespace of the referring objects.
        pub namespace: String,
    }
}

object! {
    /// A referent group, kind and optional name of a ReferenceGrant.
    pub struct ReferenceGrantTo {
        /// API group (`""` for the core group).
        pub group: String,
        /// Kind (`Service`, `Secret`, …).
        pub kind: String,
        /// Name; absent means every object of the kind.
        pub name: Option<String>,
    }
}

object! {
    /// `BackendTLSPolicy.spec`: TLS from the gateway (or sidecars) to a Service (Istio: a
    /// DestinationRule with `tls.mode: SIMPLE`).
    pub struct BackendTLSPolicySpec {
        /// The Services (or ServiceEntries) the policy applies to. Required.
        pub target_refs: Vec<LocalPolicyTargetReference>,
        /// How to verify the backend's certificate. Required.
        pub validation: BackendTLSPolicyValidation,
        /// Implementation options.
        pub options: BTreeMap<String, String>,
    }
}

object! {
    /// `validation` of a BackendTLSPolicy.
    pub struct BackendTLSPolicyValidation {
        /// ConfigMaps (key `ca.crt`) holding the CA certificates.
        pub ca_certificate_refs: Vec<super::LocalObjectReference>,
        /// `System`: the proxy's system CAs instead of `caCertificateRefs`.
        #[serde(rename = "wellKnownCACertificates")]
        pub well_known_ca_certificates: Option<String>,
        /// SNI and the name the certificate must carry. Required.
        pub hostname: String,
        /// Names accepted instead of `hostname`.
        pub subject_alt_names: Vec<SubjectAltName>,
    }
}

object! {
    /// A subject alternative name of a BackendTLSPolicy.
    pub struct SubjectAltName {
        /// `Hostname` or `URI`. Required.
        pub r#type: String,
        /// The DNS name, with `type: Hostname`.
        pub hostname: Option<String>,
        /// The URI, with `type: URI`.
        pub uri: Option<String>,
    }
}

object! {
    /// `XBackendTrafficPolicy.spec` (`gateway.networking.x-k8s.io/v1alpha1`): retry budget and session
    /// persistence for Services (Istio: DestinationRule traffic policy).
    pub struct BackendTrafficPolicySpec {
        /// The Services the policy applies to. Required.
        pub target_refs: Vec<LocalPolicyTargetReference>,
        /// Retry budget.
        pub retry_constraint: Option<RetryConstraint>,
        /// Session persistence.
        pub session_persistence: Option<SessionPersistence>,
    }
}

object! {
    /// `retryConstraint` of an XBackendTrafficPolicy.
    pub struct RetryConstraint {
        /// Share of active requests that may be retries.
        pub budget: Option<BudgetDetails>,
        /// Retries always allowed, whatever the budget.
        pub min_retry_rate: Option<RequestRate>,
    }
}

object! {
    /// A retry budget.
    pub struct BudgetDetails {
        /// Percent of active requests (default 20).
        pub percent: Option<i32>,
        /// Window, a Gateway API duration (default `10s`).
        pub interval: Option<String>,
    }
}

object! {
    /// A request rate: `count` per `interval`.
    pub struct RequestRate {
        /// Requests.
        pub count: Option<i32>,
        /// Window, a Gateway API duration.
        pub interval: Option<String>,
    }
}
