//! `xds-load`: simulates many Envoy proxies against an xDS control plane and measures it.
//!
//! ```text
//!  gen ──► config files (ServiceEntries, WorkloadEntries, VirtualServices, Sidecars) + .xds-load.json
//!  run ──► N ADS streams (client) with node identities from the same layout
//!           │ changes with markers at T0 (change) → each stream records T1/T2 (client)
//!           │ /proc/<pid> samples of the control plane (procfs)
//!           ▼
//!          summary: startup and convergence percentiles, responses/bytes per change, RSS, CPU (report)
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
pub mod procfs;
pub mod report;
pub mod run;
pub mod tls;
pub mod xds;
