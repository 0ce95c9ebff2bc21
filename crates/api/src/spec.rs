//! [`Spec`]: the typed spec of any config kind (Istio's and the Gateway API's), with decoding from a document node and
//! encoding to JSON and protobuf.

use prost::Message;

use crate::{
    de::{DecodeError, UnknownField, from_node},
    extensions, gateway_api, networking,
    schema::Kind,
    security, telemetry, wkt,
    yaml::Node,
};

/// Why [`Spec::decode_proto`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ProtoDecodeError {
    /// Malformed protobuf.
    #[error(transparent)]
    Proto(#[from] prost::DecodeError),
    /// A Gateway API spec whose `google.protobuf.Struct` does not fit the kind's type.
    #[error("{0}")]
    Json(String),
}

/// How one kind's spec goes to and from protobuf bytes: Istio's messages are prost messages; the
/// Gateway API specs travel as a `google.protobuf.Struct` of their JSON (Istio's `config.ToProto`).
trait ProtoCodec: Sized {
    fn encode_proto(&self) -> Vec<u8>;
    fn decode_proto(bytes: &[u8]) -> Result<Self, ProtoDecodeError>;
}

impl<T: Message + Default> ProtoCodec for T {
    fn encode_proto(&self) -> Vec<u8> {
        self.encode_to_vec()
    }

    fn decode_proto(bytes: &[u8]) -> Result<Self, ProtoDecodeError> {
        Ok(T::decode(bytes)?)
    }
}

macro_rules! struct_codec {
    ($($ty:ty),+ $(,)?) => {
        $(
            impl ProtoCodec for $ty {
                fn encode_proto(&self) -> Vec<u8> {
                    match serde_json::to_value(self) {
                        Ok(serde_json::Value::Object(map)) => wkt::Struct::from_json_map(&map).encode_to_vec(),
                        _ => Vec::new(),
                    }
                }

                fn decode_proto(bytes: &[u8]) -> Result<Self, ProtoDecodeError> {
                    let json = wkt::Struct::decode(bytes)?.to_json();
                    serde_json::from_value(json).map_err(|e| ProtoDecodeError::Json(e.to_string()))
                }
            }
        )+
    };
}

struct_codec!(
    gateway_api::GatewayClassSpec,
    gateway_api::GatewaySpec,
    gateway_api::HTTPRouteSpec,
    gateway_api::GRPCRouteSpec,
    gateway_api::TCPRouteSpec,
    gateway_api::TLSRouteSpec,
    gateway_api::ReferenceGrantSpec,
    gateway_api::BackendTLSPolicySpec,
    gateway_api::BackendTrafficPolicySpec,
);

macro_rules! specs {
    ($( $kind:ident => $ty:ty ),+ $(,)?) => {
        /// The typed spec of one config object. One variant per [`Kind`].
        ///
        /// Every variant is boxed, so a `Spec` is two words whatever the kind: the specs differ
        /// in size from 48 bytes to 1,200 (a DestinationRule's inline traffic policy), and an
        /// unboxed enum made every WorkloadEntry as large as the largest (BENCHMARKS.md, "Idle memory
        /// per object").
        #[derive(Clone, Debug, PartialEq)]
        pub enum Spec {
            $(
                #[doc = concat!("A ", stringify!($kind), " spec.")]
                $kind(Box<$ty>),
            )+
        }

        impl Spec {
            /// The spec's kind.
            pub fn kind(&self) -> Kind {
                match self { $( Spec::$kind(_) => Kind::$kind, )+ }
            }

            /// Decodes the `spec` node of a document of kind `kind`. A missing spec (`None`) is an
            /// empty spec, as for Istio.
            ///
            /// # Errors
            /// The first value that does not fit the kind's type, with its path (`spec.…`) and line.
            pub fn from_node(kind: Kind, node: Option<&Node>) -> Result<(Spec, Vec<UnknownField>), DecodeError> {
                match kind {
                    $(
                        Kind::$kind => match node {
                            Some(node) => from_node::<$ty>(node, "spec").map(|(s, u)| (Spec::$kind(Box::new(s)), u)),
                            None => Ok((Spec::$kind(Box::default()), Vec::new())),
                        },
                    )+
                }
            }

            /// The spec as JSON with Istio's field names; defaults are omitted.
            pub fn to_json(&self) -> serde_json::Value {
                let v = match self { $( Spec::$kind(s) => serde_json::to_value(s), )+ };
                v.unwrap_or(serde_json::Value::Null)
            }

            /// The spec as protobuf bytes: the spec message of [`crate::Schema::proto`] for Istio's
            /// kinds, a `google.protobuf.Struct` of the spec's JSON for the Gateway API kinds.
            pub fn encode_proto(&self) -> Vec<u8> {
                match self { $( Spec::$kind(s) => ProtoCodec::encode_proto(&**s), )+ }
            }

            /// Decodes protobuf bytes of kind `kind` (as [`Spec::encode_proto`] writes them).
            ///
            /// # Errors
            /// Malformed protobuf, or a Gateway API Struct that does not fit the kind.
            pub fn decode_proto(kind: Kind, bytes: &[u8]) -> Result<Spec, ProtoDecodeError> {
                Ok(match kind { $( Kind::$kind => Spec::$kind(Box::new(<$ty as ProtoCodec>::decode_proto(bytes)?)), )+ })
            }
        }
    };
}

specs! {
    VirtualService => networking::VirtualService,
    Gateway => networking::Gateway,
    ServiceEntry => networking::ServiceEntry,
    WorkloadEntry => networking::WorkloadEntry,
    WorkloadGroup => networking::WorkloadGroup,
    DestinationRule => networking::DestinationRule,
    EnvoyFilter => networking::EnvoyFilter,
    Sidecar => networking::Sidecar,
    ProxyConfig => networking::ProxyConfig,
    AuthorizationPolicy => security::AuthorizationPolicy,
    RequestAuthentication => security::RequestAuthentication,
    PeerAuthentication => security::PeerAuthentication,
    Telemetry => telemetry::Telemetry,
    WasmPlugin => extensions::WasmPlugin,
    TrafficExtension => extensions::TrafficExtension,
    GatewayClass => gateway_api::GatewayClassSpec,
    KubernetesGateway => gateway_api::GatewaySpec,
    HTTPRoute => gateway_api::HTTPRouteSpec,
    GRPCRoute => gateway_api::GRPCRouteSpec,
    TCPRoute => gateway_api::TCPRouteSpec,
    TLSRoute => gateway_api::TLSRouteSpec,
    ReferenceGrant => gateway_api::ReferenceGrantSpec,
    BackendTLSPolicy => gateway_api::BackendTLSPolicySpec,
    XBackendTrafficPolicy => gateway_api::BackendTrafficPolicySpec,
}
