//! Kubernetes label selectors (`matchLabels` and `matchExpressions` with `In`, `NotIn`, `Exists`,
//! `DoesNotExist`), as used by the mesh config's `discoverySelectors` (Istio's
//! `pkg/config/mesh/labelselector` and `pkg/kube/namespace/filter.go`).

use serde_json::Value;

use crate::service::Labels;

/// One `matchExpressions` requirement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    /// `In`: the label is present and its value is one of these.
    In(String, Vec<String>),
    /// `NotIn`: the label is absent, or its value is none of these.
    NotIn(String, Vec<String>),
    /// `Exists`: the label is present.
    Exists(String),
    /// `DoesNotExist`: the label is absent.
    DoesNotExist(String),
}

impl Requirement {
    fn matches(&self, labels: &Labels) -> bool {
        match self {
            Requirement::In(k, values) => labels.get(k).is_some_and(|v| values.contains(v)),
            Requirement::NotIn(k, values) => labels.get(k).is_none_or(|v| !values.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        }
    }
}

/// A Kubernetes `LabelSelector`: every `matchLabels` entry and every requirement must hold. An
/// empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    /// `matchLabels`: label → required value.
    pub match_labels: Labels,
    /// `matchExpressions`.
    pub match_expressions: Vec<Requirement>,
}

impl LabelSelector {
    /// Whether `labels` satisfy the selector.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }

    /// Reads a selector from its JSON form; `path` names it in errors (for example
    /// `discoverySelectors[0]`).
    ///
    /// # Errors
    /// Not a map, unknown field, a non-string label value, an unknown operator, or values given
    /// (or missing) against the operator's rule, as `path.field: reason`.
    pub fn from_json(value: &Value, path: &str) -> Result<LabelSelector, String> {
        let Value::Object(map) = value else { return Err(format!("{path}: expected a label selector map")) };
        let mut selector = LabelSelector::default();
        for (field, v) in map {
            match field.as_str() {
                "matchLabels" => {
                    let Value::Object(labels) = v else {
                        return Err(format!("{path}.matchLabels: expected a map of label to value"));
                    };
                    for (k, lv) in labels {
                        let Some(s) = lv.as_str() else {
                            return Err(format!("{path}.matchLabels.{k}: expected a string value, got {lv}"));
                        };
                        selector.match_labels.insert(k.clone(), s.to_string());
                    }
                }
                "matchExpressions" => {
                    let Value::Array(items) = v else {
                        return Err(format!("{path}.matchExpressions: expected a list"));
                    };
                    for (i, item) in items.iter().enumerate() {
                        let p = format!("{path}.matchExpressions[{i}]");
                        selector.match_expressions.push(requirement(item, &p)?);
                    }
                }
                other => return Err(format!("{path}.{other}: unknown field")),
            }
        }
        Ok(selector)
    }
}

fn requirement(item: &Value, path: &str) -> Result<Requirement, String> {
    let key = match item.get("key").and_then(Value::as_str) {
        Some(k) if !k.is_empty() => k.to_string(),
        _ => return Err(format!("{path}.key: required")),
    };
    if let Some(other) =
        item.as_object().and_then(|m| m.keys().find(|k| !["key", "operator", "values"].contains(&k.as_str())))
    {
        return Err(format!("{path}.{other}: unknown field"));
    }
    let values: Vec<String> = match item.get("values") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(j, v)| {
                v.as_str().map(str::to_string).ok_or_else(|| format!("{path}.values[{j}]: expected a string"))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(format!("{path}.values: expected a list of strings")),
    };
    let operator = item.get("operator").and_then(Value::as_str).unwrap_or_default();
    match operator {
        "In" | "NotIn" if values.is_empty() => {
            Err(format!("{path}.values: must be non-empty for operator {operator}"))
        }
        "In" => Ok(Requirement::In(key, values)),
        "NotIn" => Ok(Requirement::NotIn(key, values)),
        "Exists" | "DoesNotExist" if !values.is_empty() => {
            Err(format!("{path}.values: must be empty for operator {operator}"))
        }
        "Exists" => Ok(Requirement::Exists(key)),
        "DoesNotExist" => Ok(Requirement::DoesNotExist(key)),
        other => {
            Err(format!("{path}.operator: unknown operator {other:?} (In, NotIn, Exists, DoesNotExist)"))
        }
    }
}

/// The mesh config's `discoverySelectors`: a namespace is selected when it matches any selector; an
/// empty list selects every namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiscoverySelectors(pub Vec<LabelSelector>);

impl DiscoverySelectors {
    /// Reads the `discoverySelectors` list (JSON form of the YAML).
    ///
    /// # Errors
    /// Not a list, or an invalid selector (`discoverySelectors[i]...: reason`).
    pub fn from_json(value: &Value) -> Result<DiscoverySelectors, String> {
        match value {
            Value::Null => Ok(DiscoverySelectors::default()),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, v)| LabelSelector::from_json(v, &format!("discoverySelectors[{i}]")))
                .collect::<Result<_, _>>()
                .map(DiscoverySelectors),
            _ => Err("discoverySelectors: expected a list of label selectors".to_string()),
        }
    }

    /// `true` when no selector is configured (every namespace is selected).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether a namespace with these labels is selected.
    pub fn selects(&self, labels: &Labels) -> bool {
        self.0.is_empty() || self.0.iter().any(|s| s.matches(labels))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| ((*k).to_string(), (*v).to_string())).collect()
    }

    fn selectors(json: &str) -> Result<DiscoverySelectors, String> {
        DiscoverySelectors::from_json(&serde_json::from_str(json).unwrap())
    }

    #[test]
    fn operators_match_as_kubernetes_does() {
        let s = selectors(
            r#"[{"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]},
                                     {"key": "tier", "operator": "NotIn", "values": ["db"]},
                                     {"key": "team", "operator": "Exists"},
                                     {"key": "legacy", "operator": "DoesNotExist"}]}]"#,
        )
        .unwrap();
        assert!(s.selects(&labels(&[("app", "a"), ("team", "x")])));
        assert!(s.selects(&labels(&[("app", "b"), ("team", "x"), ("tier", "web")])));
        assert!(!s.selects(&labels(&[("app", "c"), ("team", "x")])), "In: other value");
        assert!(!s.selects(&labels(&[("team", "x")])), "In: label absent");
        assert!(!s.selects(&labels(&[("app", "a"), ("team", "x"), ("tier", "db")])), "NotIn");
        assert!(!s.selects(&labels(&[("app", "a")])), "Exists");
        assert!(!s.selects(&labels(&[("app", "a"), ("team", "x"), ("legacy", "")])), "DoesNotExist");
    }

    #[test]
    fn selectors_are_ored_and_match_labels_anded() {
        let s =
            selectors(r#"[{"matchLabels": {"env": "prod", "region": "us"}}, {"matchLabels": {"app": "x"}}]"#)
                .unwrap();
        assert!(s.selects(&labels(&[("env", "prod"), ("region", "us")])));
        assert!(s.selects(&labels(&[("app", "x")])));
        assert!(!s.selects(&labels(&[("env", "prod")])));
        assert!(DiscoverySelectors::default().selects(&labels(&[])), "no selectors select all");
        assert!(selectors("[{}]").unwrap().selects(&labels(&[])), "an empty selector matches everything");
    }

    #[test]
    fn invalid_selectors_name_the_field() {
        let err = |j: &str| selectors(j).unwrap_err();
        assert_eq!(
            err(r#"[{}, {"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["x"]}]}]"#),
            "discoverySelectors[1].matchExpressions[0].operator: unknown operator \"Equals\" (In, NotIn, Exists, DoesNotExist)"
        );
        assert_eq!(
            err(r#"[{"matchExpressions": [{"key": "a", "operator": "In"}]}]"#),
            "discoverySelectors[0].matchExpressions[0].values: must be non-empty for operator In"
        );
        assert_eq!(
            err(r#"[{"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}]"#),
            "discoverySelectors[0].matchExpressions[0].values: must be empty for operator Exists"
        );
        assert_eq!(
            err(r#"[{"matchLabels": {"a": 1}}]"#),
            "discoverySelectors[0].matchLabels.a: expected a string value, got 1"
        );
        assert_eq!(err(r#"[{"matchLabel": {}}]"#), "discoverySelectors[0].matchLabel: unknown field");
        assert_eq!(err(r#"{"a": 1}"#), "discoverySelectors: expected a list of label selectors");
    }
}
