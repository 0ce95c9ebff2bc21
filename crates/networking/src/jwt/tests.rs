use super::*;

#[test]
fn no_policy_no_filter() {
    let out = build_jwt_filter(&[], &StaticJwks::default());
    assert!(out.filter.is_none());
    assert!(out.findings.is_empty());
}
