//! [`Generated`]: what a generator returns.

use model::Finding;

/// The resources a generator made for one proxy, and what it could not honour.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Generated<T> {
    /// The resources, in a deterministic order (by name unless stated otherwise).
    pub resources: Vec<T>,
    /// Untranslated fields and dropped objects met while generating.
    pub findings: Vec<Finding>,
}

impl<T> Generated<T> {
    /// Resources and findings together.
    pub fn new(resources: Vec<T>, mut findings: Vec<Finding>) -> Generated<T> {
        findings.sort();
        findings.dedup();
        Generated { resources, findings }
    }
}
