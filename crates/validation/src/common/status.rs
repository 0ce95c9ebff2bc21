//! Status codes Istio knows by name: the HTTP codes Go's `net/http` has a text for, and the gRPC status
//! codes. Validation checks `retryOn` and fault-abort `grpcStatus` against them; route translation
//! reads `retryOn` status codes and translates `grpcStatus` names to numbers with them.

/// HTTP status codes Go's `net/http.StatusText` names.
const HTTP_STATUS_CODES: [i64; 62] = [
    100, 101, 102, 103, 200, 201, 202, 203, 204, 205, 206, 207, 208, 226, 300, 301, 302, 303, 304, 305, 307,
    308, 400, 401, 402, 403, 404, 405, 406, 407, 408, 409, 410, 411, 412, 413, 414, 415, 416, 417, 418, 421,
    422, 423, 424, 425, 426, 428, 429, 431, 451, 500, 501, 502, 503, 504, 505, 506, 507, 508, 510, 511,
];

/// gRPC status names in the order of their codes (`OK` is 0, `UNAUTHENTICATED` 16), as Istio's
/// `SupportedGRPCStatus` lists them.
const GRPC_STATUSES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// `true` for an HTTP status code Go's `net/http` has a text for (`http.StatusText(code) != ""`):
/// 100–103, 200–208, 226, 300–305, 307, 308, 400–418, 421–426, 428, 429, 431, 451, 500–508, 510, 511.
pub fn is_known_http_status(code: i64) -> bool {
    HTTP_STATUS_CODES.contains(&code)
}

/// The gRPC status code of an upper-case gRPC status name (`UNAVAILABLE` → 14), or `None` for a name
/// gRPC does not have (names are case-sensitive, as in Istio).
pub fn grpc_status_code(name: &str) -> Option<u32> {
    GRPC_STATUSES.iter().position(|n| *n == name).map(|p| p as u32)
}
