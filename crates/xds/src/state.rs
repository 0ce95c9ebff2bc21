//! Vocabulary shared by the SotW and Delta state machines.

use crate::source::Watch;

/// Where one type of one stream is in its request/response cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SyncState {
    /// The client subscribed; no response has been sent yet.
    Requested,
    /// A response was sent and is neither ACKed nor NACKed yet (`istioctl proxy-status`: STALE
    /// while it lasts).
    Sent,
    /// The latest response was ACKed (SYNCED).
    Acked,
    /// The latest response was NACKed; the client keeps running its previous config.
    Rejected,
}

impl SyncState {
    /// `requested`, `sent`, `acked` or `rejected`.
    pub fn as_str(self) -> &'static str {
        match self {
            SyncState::Requested => "requested",
            SyncState::Sent => "sent",
            SyncState::Acked => "acked",
            SyncState::Rejected => "rejected",
        }
    }
}

/// A NACK as the client sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The rejected response's nonce.
    pub nonce: String,
    /// The version the client still runs (SotW `version_info` of the NACK; empty in Delta).
    pub version: String,
    /// `error_detail.message`.
    pub message: String,
}

/// "Answer this request by generating `watch`".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Respond {
    /// What to generate.
    pub watch: Watch,
    /// Whether `watch` is the whole subscription (else only newly added names).
    pub full: bool,
}
