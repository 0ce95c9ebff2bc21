//! [`Spec`]: the typed spec of any Istio config kind, with decoding from a document node and
//! encoding to JSON and protobuf.

use prost::Message;

use crate::{
    de::{DecodeError, UnknownField, from_node},
    extensions, networking,
    schema::Kind,
    security, telemetry,
    yaml::Node,
};

macro_rules! specs {
    ($( $kind:ident => $ty:ty ),+ $(,)?) => {
        /// The typed spec of one config object. One variant per [`Kind`].
        #[derive(Clone, Debug, PartialEq)]
        #[allow(clippy::large_enum_variant)] // held once per object; boxing would add an indirection on every read
        pub enum Spec {
            $(
                #[doc = concat!("A ", stringify!($kind), " spec.")]
                $kind($ty),
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
                            Some(node) => from_node::<$ty>(node, "spec").map(|(s, u)| (Spec::$kind(s), u)),
                            None => Ok((Spec::$kind(<$ty>::default()), Vec::new())),
                        },
                    )+
                }
            }

            /// The spec as JSON with Istio's field names; defaults are omitted.
            pub fn to_json(&self) -> serde_json::Value {
                let v = match self { $( Spec::$kind(s) => serde_json::to_value(s), )+ };
                v.unwrap_or(serde_json::Value::Null)
            }

            /// The spec as protobuf bytes (the spec message of [`crate::Schema::proto`]).
            pub fn encode_proto(&self) -> Vec<u8> {
                match self { $( Spec::$kind(s) => s.encode_to_vec(), )+ }
            }

            /// Decodes protobuf bytes of kind `kind`.
            ///
            /// # Errors
            /// Malformed protobuf.
            pub fn decode_proto(kind: Kind, bytes: &[u8]) -> Result<Spec, prost::DecodeError> {
                Ok(match kind { $( Kind::$kind => Spec::$kind(<$ty>::decode(bytes)?), )+ })
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
}
