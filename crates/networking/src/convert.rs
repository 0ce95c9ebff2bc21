//! Small conversions into envoy-types messages (its own well-known types, addresses, config
//! sources, `Any` packing). Crate-private.

use std::net::IpAddr;

use envoy_types::pb::{
    envoy::config::core::v3::{
        Address, AggregatedConfigSource, ApiVersion, ConfigSource, DataSource, Pipe, SocketAddress,
        TransportSocket, address, config_source::ConfigSourceSpecifier, data_source, socket_address,
        transport_socket,
    },
    google::protobuf::{Any, BoolValue, Duration, UInt32Value, UInt64Value},
};
use prost::{Message, Name};

/// Packs `msg` with its own type URL (RUST-STACK pitfall 1).
pub(crate) fn any<T: Name + Message>(msg: &T) -> Any {
    Any { type_url: T::type_url(), value: msg.encode_to_vec() }
}

/// An Istio API duration as Envoy's.
pub(crate) fn duration(d: &api::wkt::Duration) -> Duration {
    Duration { seconds: d.seconds, nanos: d.nanos }
}

/// A std duration as Envoy's (saturating at `i64::MAX` seconds).
pub(crate) fn std_duration(d: std::time::Duration) -> Duration {
    Duration { seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX), nanos: d.subsec_nanos() as i32 }
}

/// A zero duration (`0s`: "no timeout" in route actions, "no wait" in initial fetch timeouts).
pub(crate) fn zero_duration() -> Duration {
    Duration::default()
}

pub(crate) fn u32v(value: u32) -> UInt32Value {
    UInt32Value { value }
}

pub(crate) fn u64v(value: u64) -> UInt64Value {
    UInt64Value { value }
}

pub(crate) fn boolv(value: bool) -> BoolValue {
    BoolValue { value }
}

/// `ads: {}` with the v3 resource API and no initial fetch wait (as Istio sends RDS/EDS sources).
pub(crate) fn ads_config_source() -> ConfigSource {
    ConfigSource {
        config_source_specifier: Some(ConfigSourceSpecifier::Ads(AggregatedConfigSource::default())),
        initial_fetch_timeout: Some(zero_duration()),
        resource_api_version: ApiVersion::V3 as i32,
        ..Default::default()
    }
}

/// A socket address; a `unix://` address becomes a pipe (Istio's `util.BuildAddress`).
pub(crate) fn address(addr: &str, port: u32) -> Address {
    if let Some(path) = addr.strip_prefix(model::service::UNIX_ADDRESS_PREFIX) {
        return Address { address: Some(address::Address::Pipe(Pipe { path: path.to_string(), mode: 0 })) };
    }
    Address {
        address: Some(address::Address::SocketAddress(SocketAddress {
            address: addr.to_string(),
            port_specifier: Some(socket_address::PortSpecifier::PortValue(port)),
            ..Default::default()
        })),
    }
}

/// A file data source.
pub(crate) fn file(path: &str) -> DataSource {
    DataSource { specifier: Some(data_source::Specifier::Filename(path.to_string())), ..Default::default() }
}

/// A transport socket `name` with a typed config.
pub(crate) fn transport_socket<T: Name + Message>(name: &str, config: &T) -> TransportSocket {
    TransportSocket {
        name: name.to_string(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(config))),
    }
}

/// `true` for an IPv4 or IPv6 address (no prefix length).
pub(crate) fn is_ip(addr: &str) -> bool {
    addr.parse::<IpAddr>().is_ok()
}

/// A single-address CIDR (`10.0.0.1/32`, `::1/128`) as the bare IP; the address unchanged when it is
/// already bare; `None` for a real range or anything else.
pub(crate) fn single_ip(addr: &str) -> Option<&str> {
    match addr.split_once('/') {
        None => is_ip(addr).then_some(addr),
        Some((ip, len)) => match (ip.parse::<IpAddr>(), len) {
            (Ok(IpAddr::V4(_)), "32") | (Ok(IpAddr::V6(_)), "128") => Some(ip),
            _ => None,
        },
    }
}
