//! Writing the status of Gateway API objects (GatewayClass, Gateway, HTTPRoute, GRPCRoute, TCPRoute,
//! TLSRoute) as istiod does (`pilot/pkg/config/kube/gateway` status collections, `pilot/pkg/status`).
//!
//! The status itself is computed by the converter (`meshpilot-gateway`) with every push context; this
//! module holds the pure rule turning it into what is written, given the object's live status, and the
//! write.
//!
//! **The rule** ([`desired_status`]), Istio's `SetListenerConditions` / `UpdateConditionIfChanged`
//! applied to the live status:
//! - a computed condition whose status, reason, message and `observedGeneration` equal the live one's
//!   keeps the live condition as it is (its `lastTransitionTime` included);
//! - one whose status is unchanged but whose message (or reason, or generation) changed is replaced,
//!   keeping the live `lastTransitionTime`; one whose status changed, or that is new, gets `now`;
//! - conditions of other types already on the object are kept (Istio starts from the live
//!   conditions);
//! - listeners (Gateway) are matched by `name`, route parents by their normalised `parentRef`; a route's
//!   parents written by other controllers (another `controllerName`) are kept in place, ours that no
//!   longer apply are removed, new ones appended (Istio's `createRouteStatus`);
//! - a GatewayClass keeps the live fields the converter does not compute.
//!
//! [`needs_write`] is `false` when the live status already is the desired one: nothing is written
//! when nothing changed (Istio compares the live and the desired status before queueing a write).
//!
//! **The write** ([`replace_status`]) is Istio's `UpdateStatus`: a PUT of the status subresource carrying
//! the `resourceVersion` the status was computed against, so a concurrent change is a Conflict (retried
//! with the next pass) rather than a lost update. istiod sets no field manager on it (the API server
//! then records `pilot-discovery`, from its user agent); meshpilot records
//! [`crate::client::FIELD_MANAGER`].

use api::Kind;
use kube::{
    Api, Client,
    api::{DynamicObject, PostParams},
    core::ApiResource,
};
use serde_json::{Map, Value, json};

use crate::client::{FIELD_MANAGER, KubeError, api_resource};

/// The `controllerName` Istio writes in route `parents[]` (`istio.io/gateway-controller`).
pub const GATEWAY_CONTROLLER_NAME: &str = crate::gateway_deployment::GATEWAY_CONTROLLER;

/// The Gateway API group, the default of a `parentRef`'s `group`.
const GATEWAY_API_GROUP: &str = "gateway.networking.k8s.io";

/// The kinds whose status this module writes.
pub const STATUS_KINDS: &[Kind] = &[
    Kind::GatewayClass,
    Kind::KubernetesGateway,
    Kind::HTTPRoute,
    Kind::GRPCRoute,
    Kind::TCPRoute,
    Kind::TLSRoute,
];

/// Istio's `UpdateConditionIfChanged` for each of `computed` (in order) over `live`; `now` (RFC 3339)
/// is the `lastTransitionTime` of a condition that is new or whose status changed.
pub fn merge_conditions(live: &[Value], computed: &[Value], now: &str) -> Vec<Value> {
    let mut out: Vec<Value> = live.to_vec();
    for c in computed {
        let mut c = c.clone();
        let ty = c["type"].clone();
        match out.iter_mut().find(|e| e["type"] == ty) {
            Some(existing) => {
                if existing["status"] == c["status"] {
                    let same = existing["message"] == c["message"]
                        && existing["reason"] == c["reason"]
                        && generation(existing) == generation(&c);
                    if same {
                        continue;
                    }
                    c["lastTransitionTime"] = match existing.get("lastTransitionTime") {
                        Some(Value::String(t)) if !t.is_empty() => Value::String(t.clone()),
                        _ => Value::String(now.to_string()),
                    };
                } else {
                    c["lastTransitionTime"] = Value::String(now.to_string());
                }
                *existing = c;
            }
            None => {
                c["lastTransitionTime"] = Value::String(now.to_string());
                out.push(c);
            }
        }
    }
    out
}

fn generation(condition: &Value) -> i64 {
    condition["observedGeneration"].as_i64().unwrap_or(0)
}

fn array(value: &Value, field: &str) -> Vec<Value> {
    value.get(field).and_then(Value::as_array).cloned().unwrap_or_default()
}

/// The status to write for an object of `kind` in `namespace` whose live status is `live`, from the
/// status the converter computed (see the module docs); `now` is an RFC 3339 time.
pub fn desired_status(
    kind: Kind,
    namespace: &str,
    live: Option<&Value>,
    computed: &Value,
    now: &str,
) -> Value {
    let empty = Value::Object(Map::new());
    let live = live.filter(|l| l.is_object()).unwrap_or(&empty);
    let mut out = match kind {
        // Istio's GatewayClass status starts from the live one.
        Kind::GatewayClass => {
            let mut base = live.as_object().cloned().unwrap_or_default();
            for (k, v) in computed.as_object().into_iter().flatten() {
                base.insert(k.clone(), v.clone());
            }
            Value::Object(base)
        }
        _ => computed.clone(),
    };
    let Some(map) = out.as_object_mut() else { return out };
    if computed.get("conditions").is_some() {
        let merged = merge_conditions(&array(live, "conditions"), &array(computed, "conditions"), now);
        map.insert("conditions".into(), Value::Array(merged));
    }
    if let Some(listeners) = map.get_mut("listeners").and_then(Value::as_array_mut) {
        let live_listeners = array(live, "listeners");
        for l in listeners.iter_mut() {
            let before = live_listeners
                .iter()
                .find(|x| x["name"] == l["name"])
                .map(|x| array(x, "conditions"))
                .unwrap_or_default();
            l["conditions"] = Value::Array(merge_conditions(&before, &array(l, "conditions"), now));
        }
    }
    if let Some(parents) = computed.get("parents").and_then(Value::as_array) {
        map.insert(
            "parents".into(),
            Value::Array(merge_parents(namespace, &array(live, "parents"), parents, now)),
        );
    }
    out
}

/// Route `parents[]`: other controllers' entries kept in place, ours replaced (conditions merged) or
/// removed, new ones appended.
fn merge_parents(namespace: &str, live: &[Value], computed: &[Value], now: &str) -> Vec<Value> {
    let computed: Vec<Value> = computed
        .iter()
        .map(|p| {
            let mut p = p.clone();
            p["parentRef"] = defaulted_parent_ref(&p["parentRef"]);
            p
        })
        .collect();
    let mut used = vec![false; computed.len()];
    let mut out = Vec::new();
    for l in live {
        if l["controllerName"] != GATEWAY_CONTROLLER_NAME {
            out.push(l.clone());
            continue;
        }
        let key = parent_ref_key(namespace, &l["parentRef"]);
        let found = computed
            .iter()
            .enumerate()
            .find(|(i, c)| !used[*i] && parent_ref_key(namespace, &c["parentRef"]) == key);
        if let Some((i, c)) = found {
            used[i] = true;
            out.push(parent_with_conditions(c, l, now));
        }
    }
    for (i, c) in computed.iter().enumerate() {
        if !used[i] {
            out.push(parent_with_conditions(c, &Value::Null, now));
        }
    }
    out
}

fn parent_with_conditions(computed: &Value, live: &Value, now: &str) -> Value {
    let mut p = computed.clone();
    p["conditions"] =
        Value::Array(merge_conditions(&array(live, "conditions"), &array(computed, "conditions"), now));
    p
}

/// A `parentRef` with the defaults the Gateway API CRDs give (`group`, `kind`), so that what is
/// written reads back the same.
fn defaulted_parent_ref(r: &Value) -> Value {
    let mut r = r.clone();
    if let Some(map) = r.as_object_mut() {
        map.entry("group").or_insert_with(|| GATEWAY_API_GROUP.into());
        map.entry("kind").or_insert_with(|| "Gateway".into());
    }
    r
}

/// Istio's `parentRefString`: group, kind, name, namespace (the route's when absent), section, port.
fn parent_ref_key(namespace: &str, r: &Value) -> String {
    let s = |f: &str| r.get(f).and_then(Value::as_str).unwrap_or_default().to_string();
    let group = r.get("group").and_then(Value::as_str).unwrap_or(GATEWAY_API_GROUP);
    let kind = r.get("kind").and_then(Value::as_str).unwrap_or("Gateway");
    let ns = r.get("namespace").and_then(Value::as_str).filter(|n| !n.is_empty()).unwrap_or(namespace);
    let port = r.get("port").and_then(Value::as_i64).map(|p| p.to_string()).unwrap_or_default();
    format!("{group}/{kind}/{}/{ns}/{}/{port}", s("name"), s("sectionName"))
}

/// `true` when `live` differs from `desired` (fields absent and empty lists are the same).
pub fn needs_write(live: Option<&Value>, desired: &Value) -> bool {
    normalize(live.unwrap_or(&Value::Null)) != normalize(desired)
}

/// Drops nulls and empty lists and objects, recursively (the API server need not keep them).
fn normalize(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter().map(|(k, v)| (k.clone(), normalize(v))).filter(|(_, v)| !is_empty(v)).collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(normalize).collect()),
        other => other.clone(),
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        _ => false,
    }
}

/// The API of a Gateway API kind at its current version; `namespace` empty for cluster-scoped kinds.
fn gateway_api(client: &Client, kind: Kind, namespace: &str) -> (Api<DynamicObject>, ApiResource) {
    let schema = kind.schema();
    let resource = api_resource(schema, schema.version);
    let api = if namespace.is_empty() {
        Api::all_with(client.clone(), &resource)
    } else {
        Api::namespaced_with(client.clone(), namespace, &resource)
    };
    (api, resource)
}

/// Writes `status` to the object (Istio's `UpdateStatus`: PUT of the status subresource at
/// `resource_version`); returns the object's new resource version.
///
/// # Errors
/// [`KubeError`]: a Conflict when the object changed since `resource_version`, Not Found when it is gone.
pub async fn replace_status(
    client: &Client,
    kind: Kind,
    namespace: &str,
    name: &str,
    resource_version: &str,
    status: &Value,
) -> Result<String, KubeError> {
    let (api, resource) = gateway_api(client, kind, namespace);
    let what = if namespace.is_empty() { name.to_string() } else { format!("{namespace}/{name}") };
    let action = format!("update the status of {kind} {what}");
    let mut metadata = json!({"name": name, "resourceVersion": resource_version});
    if !namespace.is_empty() {
        metadata["namespace"] = namespace.into();
    }
    let object = json!({"apiVersion": resource.api_version, "kind": resource.kind, "metadata": metadata, "status": status});
    let object: DynamicObject = serde_json::from_value(object)
        .map_err(|e| KubeError::Config(format!("{action}: not a Kubernetes object: {e}")))?;
    let pp = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..PostParams::default() };
    let written =
        api.replace_status(name, &pp, &object).await.map_err(|e| KubeError::from_kube(e, &action))?;
    Ok(written.metadata.resource_version.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(ty: &str, status: &str, reason: &str, message: &str, generation: i64, time: &str) -> Value {
        json!({"type": ty, "status": status, "reason": reason, "message": message,
               "observedGeneration": generation, "lastTransitionTime": time})
    }

    #[test]
    fn unchanged_conditions_keep_their_time_and_changed_ones_move_it_only_on_a_status_flip() {
        let live = vec![
            cond("Accepted", "True", "Accepted", "Route was valid", 1, "t0"),
            cond("Other", "True", "Mine", "another writer's", 1, "t0"),
        ];
        // Same everything: the live condition stays, time included.
        let same =
            merge_conditions(&live, &[cond("Accepted", "True", "Accepted", "Route was valid", 1, "")], "t1");
        assert_eq!(same, live);
        // New generation, same status: rewritten, time kept.
        let next =
            merge_conditions(&live, &[cond("Accepted", "True", "Accepted", "Route was valid", 2, "")], "t1");
        assert_eq!(next[0]["observedGeneration"], 2);
        assert_eq!(next[0]["lastTransitionTime"], "t0");
        assert_eq!(next[1], live[1], "another type is kept");
        // Status flips: now.
        let flip =
            merge_conditions(&live, &[cond("Accepted", "False", "NotAllowedByListeners", "no", 2, "")], "t2");
        assert_eq!(
            (flip[0]["status"].as_str(), flip[0]["lastTransitionTime"].as_str()),
            (Some("False"), Some("t2"))
        );
        // A new condition: appended with now.
        let added =
            merge_conditions(&live, &[cond("ResolvedRefs", "True", "ResolvedRefs", "ok", 1, "")], "t3");
        assert_eq!(added.len(), 3);
        assert_eq!(added[2]["lastTransitionTime"], "t3");
    }

    #[test]
    fn route_parents_of_other_controllers_stay_and_ours_are_merged_by_parent_ref() {
        let ours = |name: &str, time: &str| {
            json!({"parentRef": {"group": GATEWAY_API_GROUP, "kind": "Gateway", "name": name, "namespace": "gw"},
                   "controllerName": GATEWAY_CONTROLLER_NAME,
                   "conditions": [cond("Accepted", "True", "Accepted", "Route was valid", 1, time)]})
        };
        let foreign = json!({"parentRef": {"name": "x"}, "controllerName": "example.com/other",
                             "conditions": [cond("Accepted", "True", "Accepted", "fine", 1, "t0")]});
        let live = json!({"parents": [foreign.clone(), ours("a", "t0"), ours("gone", "t0")]});
        // Computed without defaults (group/kind) and without times.
        let computed = json!({"parents": [
            {"parentRef": {"name": "a", "namespace": "gw"}, "controllerName": GATEWAY_CONTROLLER_NAME,
             "conditions": [cond("Accepted", "True", "Accepted", "Route was valid", 1, "")]},
            {"parentRef": {"name": "b", "namespace": "gw"}, "controllerName": GATEWAY_CONTROLLER_NAME,
             "conditions": [cond("Accepted", "True", "Accepted", "Route was valid", 1, "")]},
        ]});
        let desired = desired_status(Kind::HTTPRoute, "apps", Some(&live), &computed, "t9");
        let parents = desired["parents"].as_array().unwrap();
        assert_eq!(parents.len(), 3, "{desired}");
        assert_eq!(parents[0], foreign);
        assert_eq!(parents[1], ours("a", "t0"), "unchanged parent kept as it was");
        assert_eq!(parents[2]["parentRef"]["name"], "b");
        assert_eq!(parents[2]["parentRef"]["kind"], "Gateway", "defaults written");
        assert_eq!(parents[2]["conditions"][0]["lastTransitionTime"], "t9");
        // Written, then computed again: nothing to write.
        let again = desired_status(Kind::HTTPRoute, "apps", Some(&desired), &computed, "t10");
        assert!(!needs_write(Some(&desired), &again), "{again}");
        assert!(needs_write(Some(&live), &desired));
    }

    #[test]
    fn gateway_listeners_merge_by_name_and_absent_equals_empty() {
        let live = json!({"conditions": [cond("Accepted", "True", "Accepted", "Resource accepted", 1, "t0")],
                          "listeners": [{"name": "http", "attachedRoutes": 1, "supportedKinds": [],
                                         "conditions": [cond("Accepted", "True", "Accepted", "No errors found", 1, "t0")]}]});
        let computed = json!({"addresses": [],
                              "conditions": [cond("Accepted", "True", "Accepted", "Resource accepted", 1, "")],
                              "listeners": [{"name": "http", "attachedRoutes": 2, "supportedKinds": [],
                                             "conditions": [cond("Accepted", "True", "Accepted", "No errors found", 1, "")]}]});
        let desired = desired_status(Kind::KubernetesGateway, "gw", Some(&live), &computed, "t1");
        assert_eq!(desired["listeners"][0]["attachedRoutes"], 2);
        assert_eq!(desired["listeners"][0]["conditions"][0]["lastTransitionTime"], "t0");
        assert!(needs_write(Some(&live), &desired), "attachedRoutes changed");
        let mut same = live.clone();
        same["addresses"] = json!([]);
        assert!(!needs_write(
            Some(&live),
            &desired_status(
                Kind::KubernetesGateway,
                "gw",
                Some(&same),
                &json!({
            "conditions": [cond("Accepted", "True", "Accepted", "Resource accepted", 1, "")],
            "listeners": [{"name": "http", "attachedRoutes": 1,
                           "conditions": [cond("Accepted", "True", "Accepted", "No errors found", 1, "")]}]}),
                "t2"
            )
        ));
    }

    #[test]
    fn a_gateway_class_keeps_live_fields_the_converter_does_not_compute() {
        let live = json!({"supportedFeatures": [{"name": "HTTPRoute"}], "conditions": []});
        let computed = json!({"conditions": [cond("Accepted", "True", "Accepted", "Handled by Istio controller", 1, "")]});
        let desired = desired_status(Kind::GatewayClass, "", Some(&live), &computed, "t1");
        assert_eq!(desired["supportedFeatures"], live["supportedFeatures"]);
        assert_eq!(desired["conditions"][0]["lastTransitionTime"], "t1");
    }
}
