//! `xds-load`: simulates many Envoy proxies against an xDS control plane and measures it.
//!
//! ```text
//!  gen ──► config files (ServiceEntries, WorkloadEntries, VirtualServices, Sidecars) + .xds-load.json
//!  run ──► N ADS streams (client) with node identities from the same layout
//!           │ changes with markers at T0 (change) → each stream records T1/T2 (client)
//!           │ /proc/<pid> samples of the control plane (procfs)
//!           ▼
//!          summary: startup and convergence percentiles, responses/bytes per change, RSS, CPU (report)
//!  poll ─► N REST-JSON pollers (Envoy's api_type: REST) on the HTTP port, every interval (poll)
//!           ▼
//!          summary: 200/304 counts, bytes, latency, control-plane CPU and RSS in a steady window
//! ```
//!
//! The tool only needs an ADS endpoint; it knows nothing of meshpilot beyond the config files it
//! writes (Istio's API), so the same run can be pointed at Istio's `pilot-discovery --configDir`.

pub mod change;
pub mod client;
pub mod generate;
pub mod hostile;
pub mod layout;
pub mod names;
pub mod poll;
pub mod procfs;
pub mod report;
pub mod run;
pub mod tls;
pub mod xds;
