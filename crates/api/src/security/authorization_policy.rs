//! `AuthorizationPolicy` (`security.istio.io`): access control for workloads.
//!
//! Follows `security/v1beta1/authorization_policy.proto` of the Istio API
//! (`istio.security.v1beta1.AuthorizationPolicy`).

use serde::{Deserialize, Serialize};

use crate::{
    type_v1beta1::{PolicyTargetReference, WorkloadSelector},
    wkt::is_default,
};

/// Access control for the selected workloads: the requests a list of rules matches are allowed,
/// denied, audited or handed to an external authorizer, depending on `action`.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AuthorizationPolicy {
    /// Workloads (in the policy's namespace, or all namespaces from the root namespace) the policy
    /// applies to. Unset with no `targetRefs`: every workload. At most one of `selector` and
    /// `targetRefs` may be set.
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub selector: Option<WorkloadSelector>,
    /// A single resource the policy attaches to (undocumented form of `targetRefs`).
    #[prost(message, optional, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub target_ref: Option<PolicyTargetReference>,
    /// Resources (Gateway, GatewayClass, Service, ServiceEntry) the policy attaches to; up to 16.
    /// Waypoints only honour policies that use this field.
    #[prost(message, repeated, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub target_refs: Vec<PolicyTargetReference>,
    /// Rules matched against each request; the policy matches when any rule does. No rules: the
    /// policy never matches (so an `ALLOW` policy without rules denies everything).
    #[prost(message, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub rules: Vec<Rule>,
    /// What happens to a matching request. Default `ALLOW`.
    #[prost(enumeration = "authorization_policy::Action", tag = "3")]
    #[serde(with = "authorization_policy::Action", skip_serializing_if = "is_default")]
    pub action: i32,
    /// The extension that decides a `CUSTOM` action; only used with `action: CUSTOM`.
    ///
    /// One of `action_detail`: at most one of `provider` may be set.
    #[prost(message, optional, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub provider: Option<authorization_policy::ExtensionProvider>,
}

/// Nested types of [`AuthorizationPolicy`].
#[allow(clippy::module_inception)] // prost-build layout: the message's nested types live in its snake_case module
pub mod authorization_policy {
    use serde::{Deserialize, Serialize};

    use crate::wkt::is_default;

    crate::proto_enum! {
        /// The effect of an authorization policy on the requests it matches.
        pub enum Action {
            /// Allow matching requests; requests matching no `ALLOW` policy are denied when the
            /// workload has any `ALLOW` policy. The default.
            Allow = 0 => "ALLOW",
            /// Deny matching requests.
            Deny = 1 => "DENY",
            /// Mark matching requests for auditing (no effect on the allow/deny decision).
            Audit = 2 => "AUDIT",
            /// Let the extension named in `provider` decide, before `ALLOW`/`DENY` policies are
            /// evaluated; it cannot override a denial by them.
            Custom = 3 => "CUSTOM",
        }
    }

    /// The external authorizer of a `CUSTOM` policy.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct ExtensionProvider {
        /// Name of an extension provider declared in MeshConfig `extensionProviders`. A workload
        /// may use at most one provider.
        #[prost(string, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub name: String,
    }
}

/// A set of sources, operations and conditions. A request matches when it matches at least one
/// `from` entry, at least one `to` entry, and every `when` condition; an empty rule matches all.
///
/// String values support exact (`abc`), prefix (`abc*`), suffix (`*abc`) and presence (`*`) matching.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Rule {
    /// Sources of the request; empty allows any source. Up to 512.
    #[prost(message, repeated, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub from: Vec<rule::From>,
    /// Operations the request performs; empty allows any operation.
    #[prost(message, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub to: Vec<rule::To>,
    /// Extra conditions, all of which must hold; empty adds none.
    #[prost(message, repeated, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub when: Vec<Condition>,
}

/// Nested types of [`Rule`].
pub mod rule {
    use serde::{Deserialize, Serialize};

    use crate::wkt::is_default;

    /// One entry of a rule's `from` list.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct From {
        /// The source a request must come from.
        #[prost(message, optional, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub source: Option<super::Source>,
    }

    /// One entry of a rule's `to` list.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct To {
        /// The operation a request must perform.
        #[prost(message, optional, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub operation: Option<super::Operation>,
    }
}

/// Identities a request comes from. Every field that is set must match (AND); within a list, any
/// value may match (OR). `not*` lists exclude. An unset field matches anything.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Source {
    /// Peer identities from the mTLS certificate, `<trust domain>/ns/<namespace>/sa/<service account>`
    /// (attribute `source.principal`). Needs mTLS.
    #[prost(string, repeated, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub principals: Vec<String>,
    /// Peer identities that must not match.
    #[prost(string, repeated, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub not_principals: Vec<String>,
    /// Request identities from a validated JWT, `<iss>/<sub>` (attribute `request.auth.principal`).
    #[prost(string, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub request_principals: Vec<String>,
    /// Request identities that must not match.
    #[prost(string, repeated, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub not_request_principals: Vec<String>,
    /// Namespaces of the peer, from its mTLS certificate (attribute `source.namespace`).
    #[prost(string, repeated, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub namespaces: Vec<String>,
    /// Peer namespaces that must not match.
    #[prost(string, repeated, tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub not_namespaces: Vec<String>,
    /// Kubernetes service accounts of the peer, `<namespace>/<name>` or `<name>` (the policy's
    /// namespace); no wildcards; up to 16. Not combinable with `principals` or `namespaces`.
    #[prost(string, repeated, tag = "11")]
    #[serde(skip_serializing_if = "is_default")]
    pub service_accounts: Vec<String>,
    /// Service accounts that must not match (same format as `serviceAccounts`); up to 16.
    #[prost(string, repeated, tag = "12")]
    #[serde(skip_serializing_if = "is_default")]
    pub not_service_accounts: Vec<String>,
    /// IP addresses or CIDR blocks of the packet's source address (attribute `source.ip`).
    #[prost(string, repeated, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub ip_blocks: Vec<String>,
    /// Source IPs or CIDR blocks that must not match.
    #[prost(string, repeated, tag = "8")]
    #[serde(skip_serializing_if = "is_default")]
    pub not_ip_blocks: Vec<String>,
    /// IP addresses or CIDR blocks of the original client, from `X-Forwarded-For` or the PROXY
    /// protocol (attribute `remote.ip`; needs `numTrustedProxies` configured).
    #[prost(string, repeated, tag = "9")]
    #[serde(skip_serializing_if = "is_default")]
    pub remote_ip_blocks: Vec<String>,
    /// Original-client IPs or CIDR blocks that must not match.
    #[prost(string, repeated, tag = "10")]
    #[serde(skip_serializing_if = "is_default")]
    pub not_remote_ip_blocks: Vec<String>,
    /// Trust domains of the peer, from its mTLS certificate (attribute `source.trustDomain`).
    #[prost(string, repeated, tag = "13")]
    #[serde(skip_serializing_if = "is_default")]
    pub trust_domains: Vec<String>,
    /// Peer trust domains that must not match.
    #[prost(string, repeated, tag = "14")]
    #[serde(skip_serializing_if = "is_default")]
    pub not_trust_domains: Vec<String>,
}

/// What a request does. Every field that is set must match (AND); within a list, any value may
/// match (OR). `not*` lists exclude. An unset field matches anything.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Operation {
    /// HTTP hosts (authority), matched case-insensitively. HTTP only.
    #[prost(string, repeated, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub hosts: Vec<String>,
    /// HTTP hosts that must not match.
    #[prost(string, repeated, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub not_hosts: Vec<String>,
    /// Destination ports of the connection, as strings (`"8080"`).
    #[prost(string, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub ports: Vec<String>,
    /// Destination ports that must not match.
    #[prost(string, repeated, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub not_ports: Vec<String>,
    /// HTTP methods (always `POST` for gRPC). HTTP only.
    #[prost(string, repeated, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub methods: Vec<String>,
    /// HTTP methods that must not match.
    #[prost(string, repeated, tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub not_methods: Vec<String>,
    /// Normalized HTTP paths (`/package.Service/Method` for gRPC); besides `*` matching, `{*}` and
    /// `{**}` path-template operators are supported. HTTP only.
    #[prost(string, repeated, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub paths: Vec<String>,
    /// HTTP paths that must not match.
    #[prost(string, repeated, tag = "8")]
    #[serde(skip_serializing_if = "is_default")]
    pub not_paths: Vec<String>,
}

/// A condition on one request attribute. At least one of `values` and `notValues` must be set.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Condition {
    /// The attribute, e.g. `request.headers[x-token]`, `source.ip`, `request.auth.claims[iss]`.
    /// Required.
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub key: String,
    /// Values the attribute may have (any one matches).
    #[prost(string, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub values: Vec<String>,
    /// Values the attribute must not have.
    #[prost(string, repeated, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub not_values: Vec<String>,
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::{authorization_policy::Action, *};
    use crate::{
        de::from_node,
        test_corpus::{Scope, check_corpus},
    };

    use crate::test_corpus::spec_of as spec;

    const FULL: &str = r#"
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: ext-authz
  namespace: foo
spec:
  targetRefs:
  - kind: Gateway
    group: gateway.networking.k8s.io
    name: waypoint
  action: CUSTOM
  provider:
    name: my-ext-authz
  rules:
  - from:
    - source:
        principals: ["cluster.local/ns/default/sa/curl"]
        notNamespaces: [kube-system]
    - source:
        serviceAccounts: ["default/curl", "bookinfo"]
        remoteIpBlocks: ["203.0.113.0/24"]
        notTrustDomains: ["evil.example"]
    to:
    - operation:
        hosts: ["*.example.com"]
        methods: [GET, HEAD]
        ports: ["8080"]
        notPaths: ["/admin/{**}"]
    when:
    - key: request.auth.claims[iss]
      values: ["https://accounts.example.com"]
      notValues: ["*.test"]
  - {}
"#;

    #[test]
    fn decodes_full_policy() {
        let (p, unknown) = from_node::<AuthorizationPolicy>(&spec(FULL), "spec").unwrap();
        assert!(unknown.is_empty(), "{unknown:?}");
        assert_eq!(p.action, Action::Custom as i32);
        assert_eq!(p.provider.as_ref().unwrap().name, "my-ext-authz");
        assert_eq!(p.target_refs.len(), 1);
        assert_eq!(p.target_refs[0].kind, "Gateway");
        assert_eq!(p.target_refs[0].group, "gateway.networking.k8s.io");
        assert!(p.selector.is_none());
        assert_eq!(p.rules.len(), 2);
        assert_eq!(p.rules[1], Rule::default());
        let rule = &p.rules[0];
        let s0 = rule.from[0].source.as_ref().unwrap();
        assert_eq!(s0.principals, ["cluster.local/ns/default/sa/curl"]);
        assert_eq!(s0.not_namespaces, ["kube-system"]);
        let s1 = rule.from[1].source.as_ref().unwrap();
        assert_eq!(s1.service_accounts, ["default/curl", "bookinfo"]);
        assert_eq!(s1.remote_ip_blocks, ["203.0.113.0/24"]);
        assert_eq!(s1.not_trust_domains, ["evil.example"]);
        let op = rule.to[0].operation.as_ref().unwrap();
        assert_eq!(op.hosts, ["*.example.com"]);
        assert_eq!(op.methods, ["GET", "HEAD"]);
        assert_eq!(op.ports, ["8080"]);
        assert_eq!(op.not_paths, ["/admin/{**}"]);
        assert_eq!(
            rule.when,
            [Condition {
                key: "request.auth.claims[iss]".into(),
                values: vec!["https://accounts.example.com".into()],
                not_values: vec!["*.test".into()],
            }]
        );
    }

    #[test]
    fn selector_and_deny_action() {
        let text = "spec:\n  selector:\n    matchLabels: {app: httpbin}\n  action: DENY\n  rules:\n  - to:\n    - operation: {notMethods: [GET]}\n";
        let (p, unknown) = from_node::<AuthorizationPolicy>(&spec(text), "spec").unwrap();
        assert!(unknown.is_empty());
        assert_eq!(p.action, Action::Deny as i32);
        assert_eq!(p.selector.unwrap().match_labels["app"], "httpbin");
        assert_eq!(p.rules[0].to[0].operation.as_ref().unwrap().not_methods, ["GET"]);
    }

    #[test]
    fn misspelt_field_is_reported_with_its_path() {
        let text = "spec:\n  rules:\n  - from:\n    - source:\n        principals: [a]\n    to:\n    - operation:\n        pathz: [/x]\n";
        let (_, unknown) = from_node::<AuthorizationPolicy>(&spec(text), "spec").unwrap();
        let paths: Vec<_> = unknown.iter().map(|u| (u.path.as_str(), u.mark.line)).collect();
        assert_eq!(paths, [("spec.rules[0].to[0].operation.pathz", 8)]);
    }

    #[test]
    fn unknown_action_is_an_error() {
        let err = from_node::<AuthorizationPolicy>(&spec("spec:\n  action: REJECT\n"), "spec").unwrap_err();
        assert_eq!(err.path, "spec.action");
        assert!(err.message.contains("ALLOW, DENY, AUDIT, CUSTOM"), "{err}");
    }

    #[test]
    fn protobuf_round_trip() {
        let (p, _) = from_node::<AuthorizationPolicy>(&spec(FULL), "spec").unwrap();
        let bytes = p.encode_to_vec();
        assert_eq!(AuthorizationPolicy::decode(&*bytes).unwrap(), p);
    }

    #[test]
    fn wire_field_numbers() {
        // action = 3 (varint), provider = 4 (message) { name = 1 }.
        let p = AuthorizationPolicy {
            action: Action::Custom as i32,
            provider: Some(authorization_policy::ExtensionProvider { name: "x".into() }),
            ..Default::default()
        };
        assert_eq!(p.encode_to_vec(), [0x18, 3, 0x22, 3, 0x0a, 1, b'x']);

        // targetRef = 5, targetRefs = 6, each { name = 3 }.
        let p = AuthorizationPolicy {
            target_ref: Some(PolicyTargetReference { name: "a".into(), ..Default::default() }),
            target_refs: vec![PolicyTargetReference { name: "b".into(), ..Default::default() }],
            ..Default::default()
        };
        assert_eq!(p.encode_to_vec(), [0x2a, 3, 0x1a, 1, b'a', 0x32, 3, 0x1a, 1, b'b']);

        // rules = 2 { to = 2 { operation = 1 { notPaths = 8 } }, when = 3 { notValues = 3 } }.
        let r = Rule {
            to: vec![rule::To {
                operation: Some(Operation { not_paths: vec!["/p".into()], ..Default::default() }),
            }],
            when: vec![Condition { not_values: vec!["v".into()], ..Default::default() }],
            ..Default::default()
        };
        assert_eq!(r.encode_to_vec(), [0x12, 6, 0x0a, 4, 0x42, 2, b'/', b'p', 0x1a, 3, 0x1a, 1, b'v']);

        // Source: serviceAccounts = 11, notServiceAccounts = 12, trustDomains = 13, notTrustDomains = 14.
        let s = Source {
            service_accounts: vec!["a".into()],
            not_service_accounts: vec!["b".into()],
            trust_domains: vec!["c".into()],
            not_trust_domains: vec!["d".into()],
            ..Default::default()
        };
        assert_eq!(s.encode_to_vec(), [0x5a, 1, b'a', 0x62, 1, b'b', 0x6a, 1, b'c', 0x72, 1, b'd']);
    }

    #[test]
    fn json_uses_camel_case_and_enum_names() {
        let (p, _) = from_node::<AuthorizationPolicy>(&spec(FULL), "spec").unwrap();
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["action"], "CUSTOM");
        assert_eq!(json["provider"], serde_json::json!({"name": "my-ext-authz"}));
        assert_eq!(json["targetRefs"][0]["kind"], "Gateway");
        assert_eq!(
            json["rules"][0]["from"][1]["source"]["serviceAccounts"],
            serde_json::json!(["default/curl", "bookinfo"])
        );
        assert_eq!(json["rules"][0]["when"][0]["notValues"], serde_json::json!(["*.test"]));
        assert_eq!(json["rules"][1], serde_json::json!({}));
        // Defaults are omitted: ALLOW, empty lists, unset messages.
        let allow = AuthorizationPolicy {
            rules: vec![Rule {
                from: vec![rule::From {
                    source: Some(Source { not_ip_blocks: vec!["10.0.0.0/8".into()], ..Default::default() }),
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&allow).unwrap(),
            serde_json::json!({"rules": [{"from": [{"source": {"notIpBlocks": ["10.0.0.0/8"]}}]}]})
        );
    }

    #[test]
    fn corpus_decodes_without_unknown_fields() {
        assert!(check_corpus::<AuthorizationPolicy>(crate::Kind::AuthorizationPolicy, Scope::Valid, &[]) > 0);
        assert!(check_corpus::<AuthorizationPolicy>(crate::Kind::AuthorizationPolicy, Scope::Other, &[]) > 0);
    }
}
