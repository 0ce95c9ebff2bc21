use super::*;

#[test]
fn same_key_set_ignores_key_order() {
    let a = r#"{"keys":[{"kid":"a","n":"1"},{"kid":"b","n":"2"}]}"#;
    let b = r#"{"keys": [{"kid":"b","n":"2"}, {"n":"1","kid":"a"}]}"#;
    assert!(same_key_set(a, b));
    assert!(!same_key_set(a, r#"{"keys":[{"kid":"a","n":"1"}]}"#));
}
