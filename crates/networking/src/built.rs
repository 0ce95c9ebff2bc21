//! [`Built`]: what a generator returns (named apart from `xds::Generated`, the engine's response).

use model::Finding;

/// The resources a generator built for one proxy, and what it could not honour.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Built<T> {
    /// The resources, in a deterministic order (by name unless stated otherwise).
    pub resources: Vec<T>,
    /// Untranslated fields and dropped objects met while generating.
    pub findings: Vec<Finding>,
}

impl<T> Built<T> {
    /// Resources and findings together.
    pub fn new(resources: Vec<T>, mut findings: Vec<Finding>) -> Built<T> {
        findings.sort();
        findings.dedup();
        Built { resources, findings }
    }
}
