//! MCP-over-xDS: Istio's config transport between control planes.
//!
//! Istio serves and reads config over ADS with type URLs `group/version/Kind` (the kind's canonical
//! version only, matched exactly: `networking.istio.io/v1/VirtualService`,
//! `networking.istio.io/v1alpha3/EnvoyFilter`). Each xDS resource is a `google.protobuf.Any` of an
//! [`Resource`] (`istio.mcp.v1alpha1.Resource`): [`Metadata`] (name `namespace/name`, version, labels,
//! annotations, creation time) and a body, the `Any` of the Istio spec message
//! (`type.googleapis.com/istio.networking.v1alpha3.VirtualService`). Mesh config travels as a raw
//! `istio.mesh.v1alpha1.MeshConfig` Any under [`MESH_CONFIG_TYPE_URL`], not wrapped.
//!
//! The messages here are written from the field numbers of `istio.io/api` `mcp/v1alpha1`
//! (`metadata.proto`, `resource.proto`) and `google/protobuf/{any,timestamp}.proto`. They carry the
//! wire format only; the spec-level conversions ([`to_resource`], [`from_resource`]) are Istio's
//! `PilotConfigToResource` and the body/metadata half of `adsc`'s `mcpToPilot`.

use std::collections::BTreeMap;

use prost::{Message, Name};

use crate::{Kind, Spec, schema::SCHEMAS};

/// The prefix of every protobuf `Any` type URL Istio writes.
pub const TYPE_URL_PREFIX: &str = "type.googleapis.com/";

/// The xDS type URL of mesh config: Istio's `gvk.MeshConfig` (`core/v1alpha1/MeshConfig`). Its
/// resource is a raw `istio.mesh.v1alpha1.MeshConfig` Any, with no [`Resource`] around it.
pub const MESH_CONFIG_TYPE_URL: &str = "core/v1alpha1/MeshConfig";

/// The `Any` type URL of a mesh config resource.
pub const MESH_CONFIG_ANY_TYPE_URL: &str = "type.googleapis.com/istio.mesh.v1alpha1.MeshConfig";

/// The `Any` type URL of every config resource: `type.googleapis.com/istio.mcp.v1alpha1.Resource`.
pub const RESOURCE_TYPE_URL: &str = "type.googleapis.com/istio.mcp.v1alpha1.Resource";

/// `google.protobuf.Any`: a message and the type URL naming it.
#[derive(Clone, PartialEq, Eq, Message)]
pub struct Any {
    /// `type.googleapis.com/` followed by the message's full name.
    #[prost(string, tag = "1")]
    pub type_url: String,
    /// The encoded message.
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

impl Any {
    /// Packs a named message (type URL from its [`Name`]).
    pub fn pack<M: Message + Name>(message: &M) -> Any {
        Any { type_url: M::type_url(), value: message.encode_to_vec() }
    }

    /// Unpacks a named message.
    ///
    /// # Errors
    /// The type URL is not `M`'s, or the bytes do not decode.
    pub fn unpack<M: Message + Name + Default>(&self) -> Result<M, McpError> {
        if self.type_url != M::type_url() {
            return Err(McpError::new(
                "",
                "type_url",
                format!("expected {}, got {:?}", M::type_url(), self.type_url),
            ));
        }
        M::decode(self.value.as_slice()).map_err(|e| McpError::new("", "value", e.to_string()))
    }
}

/// `google.protobuf.Timestamp`: seconds and nanoseconds since the Unix epoch (UTC).
#[derive(Clone, Copy, PartialEq, Eq, Message)]
pub struct Timestamp {
    /// Whole seconds since 1970-01-01T00:00:00Z (negative before it).
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    /// Non-negative nanoseconds within the second, 0..=999,999,999.
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

impl Timestamp {
    /// Parses an RFC 3339 time (`2026-11-21T05:00:00Z`, Kubernetes' `creationTimestamp`).
    ///
    /// # Errors
    /// Not an RFC 3339 time; the message says why.
    pub fn from_rfc3339(text: &str) -> Result<Timestamp, String> {
        let t: jiff::Timestamp =
            text.parse().map_err(|e: jiff::Error| format!("{text:?} is not an RFC 3339 time: {e}"))?;
        Ok(Timestamp { seconds: t.as_second(), nanos: t.subsec_nanosecond() })
    }

    /// Formats as RFC 3339 in UTC (`2026-11-21T05:00:00Z`; fractional seconds only when non-zero).
    ///
    /// # Errors
    /// Out of the range 0001..9999 or nanoseconds out of range.
    pub fn to_rfc3339(&self) -> Result<String, String> {
        jiff::Timestamp::new(self.seconds, self.nanos)
            .map(|t| t.to_string())
            .map_err(|e| format!("timestamp {}s {}ns is out of range: {e}", self.seconds, self.nanos))
    }
}

/// `istio.mcp.v1alpha1.Metadata`: the metadata of one config resource.
#[derive(Clone, PartialEq, Eq, Message)]
pub struct Metadata {
    /// `namespace/name` (Istio's config kinds are all namespaced).
    #[prost(string, tag = "1")]
    pub name: String,
    /// Creation time, when the source knows it.
    #[prost(message, optional, tag = "2")]
    pub create_time: Option<Timestamp>,
    /// Opaque version of the resource; istiod's client replaces its copy only when this changes.
    #[prost(string, tag = "3")]
    pub version: String,
    /// Labels.
    #[prost(btree_map = "string, string", tag = "4")]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[prost(btree_map = "string, string", tag = "5")]
    pub annotations: BTreeMap<String, String>,
}

/// `istio.mcp.v1alpha1.Resource`: one config object on the wire.
#[derive(Clone, PartialEq, Eq, Message)]
pub struct Resource {
    /// The object's metadata.
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    /// The spec, an `Any` of the kind's Istio proto message (see [`spec_type_url`]).
    #[prost(message, optional, tag = "2")]
    pub body: Option<Any>,
}

impl Name for Resource {
    const NAME: &'static str = "Resource";
    const PACKAGE: &'static str = "istio.mcp.v1alpha1";

    /// `type.googleapis.com/istio.mcp.v1alpha1.Resource` ([`RESOURCE_TYPE_URL`]), as Go's `anypb`
    /// writes it (prost's default would be `/istio.mcp.v1alpha1.Resource`).
    fn type_url() -> String {
        RESOURCE_TYPE_URL.to_string()
    }
}

/// An MCP resource that cannot be read, naming the resource (`namespace/name`, or the kind and
/// position when the name itself is missing), the field and the reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}{field}: {reason}", if .resource.is_empty() { String::new() } else { format!("{}: ", .resource) })]
pub struct McpError {
    /// The resource: `Kind namespace/name` or whatever identifies it.
    pub resource: String,
    /// The field path inside the resource (`metadata.name`, `body.type_url`, `body`).
    pub field: String,
    /// What is wrong.
    pub reason: String,
}

impl McpError {
    /// An error about `field` of `resource`.
    pub fn new(resource: impl Into<String>, field: impl Into<String>, reason: impl Into<String>) -> McpError {
        McpError { resource: resource.into(), field: field.into(), reason: reason.into() }
    }
}

/// The MCP type URL of a kind: `group/version/Kind` at the kind's canonical version, as istiod's
/// `ConfigInitialRequests` asks for it (`networking.istio.io/v1/VirtualService`,
/// `networking.istio.io/v1alpha3/EnvoyFilter`, `security.istio.io/v1/AuthorizationPolicy`).
pub fn type_url(kind: Kind) -> String {
    kind.schema().mcp_type_url()
}

/// The kind whose MCP type URL is exactly `type_url`. Older versions (`networking.istio.io/v1alpha3/
/// VirtualService`) are not matched: istiod's generator lists its store by the exact GroupVersionKind,
/// and its client only ever asks for the canonical one. Only Istio's own kinds ([`Kind::ISTIO`]) are
/// MCP kinds: the Gateway API kinds are not carried over MCP (istiod's client never subscribes to
/// them), so their type URLs give `None`.
pub fn kind_from_type_url(type_url: &str) -> Option<Kind> {
    SCHEMAS.iter().find(|s| s.mcp_type_url() == type_url && Kind::ISTIO.contains(&s.kind)).map(|s| s.kind)
}

/// Every type URL istiod's MCP client subscribes to, in its order (`pkg/adsc`
/// `ConfigInitialRequests`): [`MESH_CONFIG_TYPE_URL`], then every kind of `collections.Pilot`
/// (sorted by kind name, as Istio's generated collection list is).
pub fn requested_type_urls() -> Vec<String> {
    let mut kinds: Vec<Kind> = Kind::ISTIO.to_vec();
    kinds.sort_by_key(|k| k.as_str());
    std::iter::once(MESH_CONFIG_TYPE_URL.to_string()).chain(kinds.into_iter().map(type_url)).collect()
}

/// The `Any` type URL of a kind's spec: `type.googleapis.com/` + the Istio proto message
/// (`type.googleapis.com/istio.networking.v1alpha3.VirtualService`).
pub fn spec_type_url(kind: Kind) -> String {
    format!("{TYPE_URL_PREFIX}{}", kind.schema().proto)
}

/// A spec as the `Any` Istio puts in [`Resource::body`].
pub fn spec_to_any(spec: &Spec) -> Any {
    Any { type_url: spec_type_url(spec.kind()), value: spec.encode_proto() }
}

/// The metadata of a config object, as carried by [`Metadata`] and split into Istio's pieces.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceMeta {
    /// Namespace (before the `/` of [`Metadata::name`]).
    pub namespace: String,
    /// Name (after the `/`).
    pub name: String,
    /// [`Metadata::version`]; empty when the server sent none.
    pub version: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    pub annotations: BTreeMap<String, String>,
    /// Creation time as RFC 3339, when sent.
    pub creation_timestamp: Option<String>,
}

/// Builds the MCP resource of an object (Istio's `PilotConfigToResource`): metadata name
/// `namespace/name`, the version, labels, annotations and creation time of `meta`, body the spec's
/// Any. A creation time that is not RFC 3339 is left out (Istio's store always has one; ours may not).
pub fn to_resource(meta: &ResourceMeta, spec: &Spec) -> Resource {
    Resource {
        metadata: Some(Metadata {
            name: format!("{}/{}", meta.namespace, meta.name),
            create_time: meta.creation_timestamp.as_deref().and_then(|t| Timestamp::from_rfc3339(t).ok()),
            version: meta.version.clone(),
            labels: meta.labels.clone(),
            annotations: meta.annotations.clone(),
        }),
        body: Some(spec_to_any(spec)),
    }
}

/// Reads an MCP resource of kind `kind` (the kind of the response's type URL).
///
/// # Errors
/// Names the resource and field: no metadata, a name that is not `namespace/name` (istiod's client
/// rejects those too), an invalid creation time, no body, a body of another message than the kind's
/// spec, or a body that does not decode.
pub fn from_resource(kind: Kind, resource: &Resource) -> Result<(ResourceMeta, Spec), McpError> {
    let Some(metadata) = &resource.metadata else {
        return Err(McpError::new(format!("{kind} (unnamed)"), "metadata", "missing"));
    };
    let (namespace, name) = match metadata.name.split_once('/') {
        Some((ns, n)) if !ns.is_empty() && !n.is_empty() && !n.contains('/') => (ns, n),
        _ => {
            return Err(McpError::new(
                format!("{kind} {:?}", metadata.name),
                "metadata.name",
                "must be namespace/name",
            ));
        }
    };
    let id = format!("{kind} {namespace}/{name}");
    let creation_timestamp = match &metadata.create_time {
        None => None,
        Some(t) => Some(t.to_rfc3339().map_err(|e| McpError::new(&id, "metadata.create_time", e))?),
    };
    let Some(body) = &resource.body else {
        return Err(McpError::new(&id, "body", "missing"));
    };
    let expected = spec_type_url(kind);
    if body.type_url != expected {
        return Err(McpError::new(
            &id,
            "body.type_url",
            format!("expected {expected}, got {:?}", body.type_url),
        ));
    }
    let spec = Spec::decode_proto(kind, &body.value)
        .map_err(|e| McpError::new(&id, "body.value", format!("malformed {}: {e}", kind.schema().proto)))?;
    let meta = ResourceMeta {
        namespace: namespace.to_string(),
        name: name.to_string(),
        version: metadata.version.clone(),
        labels: metadata.labels.clone(),
        annotations: metadata.annotations.clone(),
        creation_timestamp,
    };
    Ok((meta, spec))
}

/// A content version for [`Metadata::version`]: changes whenever the spec, the labels or the
/// annotations change, and is the same for the same content in any process (so a restarted server
/// sends the versions it sent before). 16 hex digits of 64-bit FNV-1a over the spec's protobuf
/// encoding (deterministic: every map is ordered) and the length-prefixed labels and annotations.
pub fn content_version(
    spec: &Spec,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> String {
    let mut h = Fnv64::new();
    h.write_field(spec.kind().as_str().as_bytes());
    h.write_field(&spec.encode_proto());
    for map in [labels, annotations] {
        h.write_field(&(map.len() as u64).to_le_bytes());
        for (k, v) in map {
            h.write_field(k.as_bytes());
            h.write_field(v.as_bytes());
        }
    }
    format!("{:016x}", h.0)
}

struct Fnv64(u64);

impl Fnv64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    fn new() -> Fnv64 {
        Fnv64(Self::OFFSET)
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    /// Length-prefixed, so ("ab","c") and ("a","bc") differ.
    fn write_field(&mut self, bytes: &[u8]) {
        self.write(&(bytes.len() as u64).to_le_bytes());
        self.write(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_corpus::spec_of;

    /// One object per kind with a spec that exercises nested messages, maps, enums and oneofs.
    const SAMPLES: &[(Kind, &str)] = &[
        (
            Kind::VirtualService,
            "spec:\n  hosts: [reviews]\n  http:\n  - match:\n    - uri: {prefix: /v2}\n      headers: {x: {exact: y}}\n    route:\n    - destination: {host: reviews, subset: v2}\n      weight: 100\n    timeout: 1.5s\n",
        ),
        (
            Kind::Gateway,
            "spec:\n  selector: {istio: ingressgateway}\n  servers:\n  - port: {number: 80, name: http, protocol: HTTP}\n    hosts: ['*']\n",
        ),
        (
            Kind::ServiceEntry,
            "spec:\n  hosts: [api.example.com]\n  ports: [{number: 443, name: https, protocol: TLS}]\n  resolution: DNS\n  location: MESH_EXTERNAL\n",
        ),
        (Kind::WorkloadEntry, "spec:\n  address: 10.0.0.1\n  labels: {app: a}\n  ports: {http: 8080}\n"),
        (Kind::WorkloadGroup, "spec:\n  metadata: {labels: {app: a}}\n  template: {serviceAccount: sa}\n"),
        (
            Kind::DestinationRule,
            "spec:\n  host: reviews\n  trafficPolicy: {loadBalancer: {simple: ROUND_ROBIN}, tls: {mode: ISTIO_MUTUAL}}\n  subsets: [{name: v1, labels: {version: v1}}]\n",
        ),
        (
            Kind::EnvoyFilter,
            "spec:\n  configPatches:\n  - applyTo: HTTP_FILTER\n    match: {context: SIDECAR_INBOUND}\n    patch: {operation: INSERT_BEFORE, value: {name: x, typed_config: {a: [1, true, null]}}}\n",
        ),
        (
            Kind::Sidecar,
            "spec:\n  egress: [{hosts: ['./*', 'istio-system/*']}]\n  outboundTrafficPolicy: {mode: REGISTRY_ONLY}\n",
        ),
        (Kind::ProxyConfig, "spec:\n  concurrency: 2\n  environmentVariables: {A: b}\n"),
        (
            Kind::AuthorizationPolicy,
            "spec:\n  action: DENY\n  rules:\n  - from: [{source: {principals: [cluster.local/ns/a/sa/b]}}]\n    to: [{operation: {methods: [GET]}}]\n",
        ),
        (
            Kind::RequestAuthentication,
            "spec:\n  jwtRules: [{issuer: iss, jwksUri: 'https://example.com/jwks'}]\n",
        ),
        (
            Kind::PeerAuthentication,
            "spec:\n  mtls: {mode: STRICT}\n  portLevelMtls: {'8080': {mode: DISABLE}}\n",
        ),
        (Kind::Telemetry, "spec:\n  accessLogging: [{providers: [{name: envoy}]}]\n"),
        (Kind::WasmPlugin, "spec:\n  url: oci://example.com/p:1\n  phase: AUTHN\n  pluginConfig: {k: v}\n"),
        (Kind::TrafficExtension, "spec:\n  phase: AUTHN\n"),
    ];

    fn sample(kind: Kind) -> Spec {
        let text = SAMPLES.iter().find(|(k, _)| *k == kind).map(|(_, t)| *t).expect("a sample per kind");
        let (spec, unknown) = Spec::from_node(kind, Some(&spec_of(text))).expect("sample decodes");
        assert!(unknown.is_empty(), "{kind}: unknown fields {unknown:?}");
        spec
    }

    fn meta() -> ResourceMeta {
        ResourceMeta {
            namespace: "default".into(),
            name: "obj".into(),
            version: "v7".into(),
            labels: BTreeMap::from([("app".into(), "a".into())]),
            annotations: BTreeMap::from([("note".into(), "n".into())]),
            creation_timestamp: Some("2026-11-21T05:00:00Z".into()),
        }
    }

    #[test]
    fn every_kind_round_trips_through_the_wire() {
        assert_eq!(SAMPLES.len(), Kind::ISTIO.len());
        for &kind in Kind::ISTIO {
            let spec = sample(kind);
            assert_ne!(spec.encode_proto(), Vec::<u8>::new(), "{kind}: sample must not be empty");
            let resource = to_resource(&meta(), &spec);
            let any = Any::pack(&resource);
            assert_eq!(any.type_url, RESOURCE_TYPE_URL);
            let back: Resource = Any::decode(any.encode_to_vec().as_slice()).unwrap().unpack().unwrap();
            let body = back.body.as_ref().unwrap();
            assert_eq!(body.type_url, format!("type.googleapis.com/{}", kind.schema().proto));
            let (m, s) = from_resource(kind, &back).unwrap();
            assert_eq!(s, spec, "{kind}");
            assert_eq!(m, meta(), "{kind}");
        }
    }

    #[test]
    fn type_urls_match_what_istiod_requests() {
        // istiod's client asks for these exact strings (pkg/adsc ConfigInitialRequests over
        // collections.Pilot); spot-check the non-v1 ones and the full count.
        let urls = requested_type_urls();
        assert_eq!(urls[0], "core/v1alpha1/MeshConfig");
        assert_eq!(urls[1], "security.istio.io/v1/AuthorizationPolicy");
        for expected in [
            "networking.istio.io/v1/VirtualService",
            "networking.istio.io/v1/DestinationRule",
            "networking.istio.io/v1/ServiceEntry",
            "networking.istio.io/v1alpha3/EnvoyFilter",
            "networking.istio.io/v1beta1/ProxyConfig",
            "extensions.istio.io/v1alpha1/WasmPlugin",
            "extensions.istio.io/v1alpha1/TrafficExtension",
            "telemetry.istio.io/v1/Telemetry",
            "security.istio.io/v1/PeerAuthentication",
        ] {
            assert!(urls.iter().any(|u| u == expected), "{expected} missing from {urls:?}");
        }
        assert_eq!(urls.len(), Kind::ISTIO.len() + 1);
        for &kind in Kind::ISTIO {
            assert_eq!(kind_from_type_url(&type_url(kind)), Some(kind));
        }
        for &kind in Kind::GATEWAY_API {
            assert_eq!(kind_from_type_url(&type_url(kind)), None, "{kind} is not an MCP kind");
        }
        // Exact match only: an alias version or the Any URL of the spec is not a kind's type URL.
        assert_eq!(kind_from_type_url("networking.istio.io/v1alpha3/VirtualService"), None);
        assert_eq!(kind_from_type_url("type.googleapis.com/istio.networking.v1alpha3.VirtualService"), None);
        assert_eq!(kind_from_type_url(MESH_CONFIG_TYPE_URL), None);
    }

    #[test]
    fn bad_resources_name_resource_and_field() {
        let good = to_resource(&meta(), &sample(Kind::VirtualService));
        let mut no_meta = good.clone();
        no_meta.metadata = None;
        assert_eq!(from_resource(Kind::VirtualService, &no_meta).unwrap_err().field, "metadata");

        let mut bad_name = good.clone();
        bad_name.metadata.as_mut().unwrap().name = "justname".into();
        let e = from_resource(Kind::VirtualService, &bad_name).unwrap_err();
        assert_eq!(e.to_string(), "VirtualService \"justname\": metadata.name: must be namespace/name");

        let e = from_resource(Kind::DestinationRule, &good).unwrap_err();
        assert_eq!(e.field, "body.type_url");
        assert!(e.to_string().starts_with("DestinationRule default/obj: body.type_url: expected"), "{e}");

        let mut garbage = good.clone();
        garbage.body.as_mut().unwrap().value = vec![0x0a, 0xff];
        let e = from_resource(Kind::VirtualService, &garbage).unwrap_err();
        assert_eq!(e.field, "body.value");
        assert!(e.to_string().contains("istio.networking.v1alpha3.VirtualService"), "{e}");

        let mut no_body = good;
        no_body.body = None;
        assert_eq!(from_resource(Kind::VirtualService, &no_body).unwrap_err().field, "body");
    }

    #[test]
    fn content_version_follows_content() {
        let spec = sample(Kind::VirtualService);
        let m = meta();
        let v = content_version(&spec, &m.labels, &m.annotations);
        assert_eq!(v.len(), 16);
        assert_eq!(v, content_version(&spec.clone(), &m.labels.clone(), &m.annotations.clone()));
        let mut edited = spec.clone();
        if let Spec::VirtualService(vs) = &mut edited {
            vs.hosts.push("ratings".into());
        }
        assert_ne!(v, content_version(&edited, &m.labels, &m.annotations));
        let mut labels = m.labels.clone();
        labels.insert("version".into(), "v2".into());
        assert_ne!(v, content_version(&spec, &labels, &m.annotations));
        // A label moved to the annotations is a different object.
        assert_ne!(
            content_version(&spec, &m.labels, &BTreeMap::new()),
            content_version(&spec, &BTreeMap::new(), &m.labels)
        );
    }

    #[test]
    fn timestamps_convert_both_ways() {
        let t = Timestamp::from_rfc3339("2026-11-21T05:00:00.5Z").unwrap();
        assert_eq!((t.seconds, t.nanos), (1_795_237_200, 500_000_000));
        assert_eq!(t.to_rfc3339().unwrap(), "2026-11-21T05:00:00.5Z");
        assert!(Timestamp::from_rfc3339("yesterday").unwrap_err().contains("yesterday"));
        assert!(Timestamp { seconds: i64::MAX, nanos: 0 }.to_rfc3339().is_err());
    }
}
