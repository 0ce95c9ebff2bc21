//! Writing Istio status to cluster objects: `status.validationMessages` (Istio's `IstioStatus`, written
//! by istiod's in-cluster analysis, `pilot/pkg/status` + `pkg/config/analysis/incluster`) and
//! meshpilot's `Reconciled` condition.
//!
//! This module holds the parts that talk to the API server and the pure rule deciding what to write;
//! *what* the status should be is computed by the caller (the `meshpilot discovery` binary, which owns
//! the analyzers and the per-object push state) and handed in as a [`DesiredStatus`].
//!
//! **Shape** (Istio's `IstioStatus` in JSON): `validationMessages: [{type: {name, code}, level,
//! documentationUrl}]` with `level` the proto enum name (`ERROR`, `WARNING`, `INFO`),
//! `observedGeneration` as a **string** (an int64 in proto JSON, as istiod writes it), `conditions:
//! [{type, status, reason, message, lastTransitionTime, observedGeneration}]`. istiod fills only
//! `type.code`; meshpilot also writes `type.name` (a field of the same message), so `kubectl get -o yaml`
//! says what the code means.
//!
//! **The rule** ([`status_update`]): nothing is written when the object's current status already says
//! what is desired (messages equal, `observedGeneration` current, the condition's status, reason and
//! message equal); `lastTransitionTime` changes only when the condition's status does (Kubernetes'
//! convention; Istio's old distribution reporter reset it on every write). Conditions of other
//! writers are kept. Messages that went away are removed (`validationMessages` dropped), also
//! those left by an earlier process: the comparison is with the object as read from the cluster, not
//! with what this process wrote (istiod forgets messages of a previous run, its noted "state
//! destruction problem").
//!
//! **Writes** ([`patch_status`]) are JSON merge patches on the `status` subresource with field manager
//! [`crate::client::FIELD_MANAGER`]: no resourceVersion, so no conflicts with concurrent spec edits;
//! a stale write is corrected by the next pass, since the object's new generation differs from the
//! written `observedGeneration`.

use api::Kind;
use kube::{
    Client,
    api::{Patch, PatchParams},
};
use serde_json::{Value, json};

use crate::client::{FIELD_MANAGER, KubeError, kind_api};

/// The condition type meshpilot writes (the name of Istio's former distribution condition).
pub const RECONCILED: &str = "Reconciled";

/// One analysis message as written in `status.validationMessages` (Istio's `AnalysisMessageBase`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationMessage {
    /// `IST0101`.
    pub code: String,
    /// `ReferencedResourceNotFound`.
    pub name: String,
    /// `ERROR`, `WARNING` or `INFO` (the proto enum name).
    pub level: String,
    /// The code's documentation page.
    pub documentation_url: String,
}

impl ValidationMessage {
    /// The JSON written.
    pub fn to_json(&self) -> Value {
        json!({
            "type": {"name": self.name, "code": self.code},
            "level": self.level,
            "documentationUrl": self.documentation_url,
        })
    }
}

/// The `Reconciled` condition's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// `true`: `status: "True"`.
    pub status: bool,
    /// A CamelCase reason.
    pub reason: String,
    /// A sentence for people.
    pub message: String,
}

/// What the status of one object should say; `None` fields are not managed (left as they are).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DesiredStatus {
    /// The analysis messages (`Some(empty)` clears them).
    pub validation_messages: Option<Vec<ValidationMessage>>,
    /// The `Reconciled` condition.
    pub reconciled: Option<Condition>,
}

fn condition_status(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// The new `status` of an object whose current status is `current` and generation `generation`, or
/// `None` when `current` already says what `desired` asks (see the module docs). `now` is the RFC 3339
/// time written as `lastTransitionTime` when the condition's status changes.
pub fn status_update(
    current: Option<&Value>,
    generation: i64,
    desired: &DesiredStatus,
    now: &str,
) -> Option<Value> {
    let mut status = current.and_then(Value::as_object).cloned().unwrap_or_default();
    let generation_text = generation.to_string();
    let mut changed = false;
    let mut wrote_something = false;
    if let Some(messages) = &desired.validation_messages {
        let want: Vec<Value> = messages.iter().map(ValidationMessage::to_json).collect();
        let have = status.get("validationMessages").and_then(Value::as_array).cloned().unwrap_or_default();
        if have != want {
            changed = true;
            if want.is_empty() {
                status.remove("validationMessages");
            } else {
                status.insert("validationMessages".into(), Value::Array(want.clone()));
            }
        }
        wrote_something |= !want.is_empty();
    }
    if let Some(cond) = &desired.reconciled {
        wrote_something = true;
        let mut conditions = status.get("conditions").and_then(Value::as_array).cloned().unwrap_or_default();
        let index = conditions.iter().position(|c| c["type"] == RECONCILED);
        let old = index.map(|i| conditions[i].clone());
        let want_status = condition_status(cond.status);
        let same_status = old.as_ref().is_some_and(|o| o["status"] == want_status);
        let transition = match &old {
            Some(o) if same_status => o["lastTransitionTime"].as_str().unwrap_or(now).to_string(),
            _ => now.to_string(),
        };
        let new = json!({
            "type": RECONCILED,
            "status": want_status,
            "reason": cond.reason,
            "message": cond.message,
            "lastTransitionTime": transition,
            "observedGeneration": generation_text,
        });
        let differs = old.as_ref().is_none_or(|o| {
            !same_status
                || o["reason"] != new["reason"]
                || o["message"] != new["message"]
                || o["observedGeneration"] != new["observedGeneration"]
        });
        if differs {
            changed = true;
            match index {
                Some(i) => conditions[i] = new,
                None => conditions.push(new),
            }
            status.insert("conditions".into(), Value::Array(conditions));
        }
    }
    // istiod writes observedGeneration with every status it writes.
    if wrote_something
        && status.get("observedGeneration").and_then(Value::as_str) != Some(generation_text.as_str())
    {
        changed = true;
    }
    if !changed {
        return None;
    }
    if wrote_something {
        status.insert("observedGeneration".into(), Value::String(generation_text));
    }
    Some(Value::Object(status))
}

/// The merge patch replacing `old` status by `new`: every field of `new`, and `null` for fields of
/// `old` that `new` lacks (a merge patch deletes with `null`).
pub fn merge_patch(old: Option<&Value>, new: &Value) -> Value {
    let mut patch = new.as_object().cloned().unwrap_or_default();
    if let Some(old) = old.and_then(Value::as_object) {
        for k in old.keys() {
            if !patch.contains_key(k) {
                patch.insert(k.clone(), Value::Null);
            }
        }
    }
    json!({ "status": patch })
}

/// Writes the `status` of one Istio object: a JSON merge patch of its status subresource (field manager
/// [`FIELD_MANAGER`]). `patch` is `{"status": {...}}` ([`merge_patch`]).
///
/// # Errors
/// [`KubeError`] (Not Found when the object is gone).
pub async fn patch_status(
    client: &Client,
    kind: Kind,
    namespace: &str,
    name: &str,
    patch: &Value,
) -> Result<(), KubeError> {
    let action = format!("update the status of {kind} {namespace}/{name}");
    kind_api(client, kind, Some(namespace))
        .patch_status(
            name,
            &PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..PatchParams::default() },
            &Patch::Merge(patch),
        )
        .await
        .map(|_| ())
        .map_err(|e| KubeError::from_kube(e, &action))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ist0101() -> ValidationMessage {
        ValidationMessage {
            code: "IST0101".into(),
            name: "ReferencedResourceNotFound".into(),
            level: "ERROR".into(),
            documentation_url: "https://istio.io/latest/docs/reference/config/analysis/ist0101/".into(),
        }
    }

    #[test]
    fn messages_are_written_once_then_nothing_until_they_change() {
        let desired = DesiredStatus { validation_messages: Some(vec![ist0101()]), reconciled: None };
        let written = status_update(None, 3, &desired, "t0").unwrap();
        assert_eq!(written["observedGeneration"], "3");
        assert_eq!(written["validationMessages"][0]["type"]["code"], "IST0101");
        assert_eq!(written["validationMessages"][0]["level"], "ERROR");
        // The same desire against what was written: no write.
        assert_eq!(status_update(Some(&written), 3, &desired, "t1"), None);
        // A new generation with the same messages: observedGeneration moves.
        let next = status_update(Some(&written), 4, &desired, "t1").unwrap();
        assert_eq!(next["observedGeneration"], "4");
        // Messages gone: the field is removed, and the merge patch deletes it.
        let cleared = DesiredStatus { validation_messages: Some(vec![]), reconciled: None };
        let after = status_update(Some(&next), 4, &cleared, "t2").unwrap();
        assert!(after.get("validationMessages").is_none());
        assert_eq!(merge_patch(Some(&next), &after)["status"]["validationMessages"], Value::Null);
        // Nothing to say about an object that never had messages.
        assert_eq!(status_update(None, 1, &cleared, "t0"), None);
    }

    #[test]
    fn the_condition_keeps_its_transition_time_and_other_conditions() {
        let current = json!({"conditions": [{"type": "Other", "status": "True"}]});
        let pending =
            Condition { status: false, reason: "Pending".into(), message: "0/1 proxies up to date.".into() };
        let want = DesiredStatus { validation_messages: None, reconciled: Some(pending.clone()) };
        let s1 = status_update(Some(&current), 2, &want, "t0").unwrap();
        let conds = s1["conditions"].as_array().unwrap();
        assert_eq!(conds.len(), 2);
        assert_eq!(conds[0]["type"], "Other");
        assert_eq!(
            (conds[1]["status"].as_str(), conds[1]["lastTransitionTime"].as_str()),
            (Some("False"), Some("t0"))
        );
        assert_eq!(status_update(Some(&s1), 2, &want, "t1"), None);
        // Same status, new message: rewritten, transition time kept.
        let more = Condition { message: "0/2 proxies up to date.".into(), ..pending };
        let s2 = status_update(Some(&s1), 2, &DesiredStatus { reconciled: Some(more), ..want.clone() }, "t2")
            .unwrap();
        assert_eq!(s2["conditions"][1]["lastTransitionTime"], "t0");
        // Status flips: new transition time.
        let done = Condition {
            status: true,
            reason: "Reconciled".into(),
            message: "2/2 proxies up to date.".into(),
        };
        let s3 =
            status_update(Some(&s2), 2, &DesiredStatus { reconciled: Some(done), ..want }, "t3").unwrap();
        assert_eq!(
            (s3["conditions"][1]["status"].as_str(), s3["conditions"][1]["lastTransitionTime"].as_str()),
            (Some("True"), Some("t3"))
        );
    }
}
