//! Injection into manifests, offline (istioctl's `kube-inject`, istiod's `IntoResourceFile` /
//! `IntoObject`): every workload of a YAML stream gets its pod template injected; other objects
//! pass through unchanged.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use crate::config::{InjectConfig, Policy, SIDECAR_TEMPLATE, Values};
use crate::inject::{
    IGNORED_NAMESPACES, InjectError, InjectionParams, Owner, inject_pod, inject_required, owner_of_pod,
};
use crate::view::yaml_text;

/// Why a manifest could not be injected.
#[derive(Debug, thiserror::Error)]
pub enum ResourceError {
    /// A document is not YAML.
    #[error(transparent)]
    Yaml(#[from] crate::yaml::YamlError),
    /// A workload could not be injected.
    #[error("{kind} {name:?}: {source}")]
    Inject {
        /// The workload's kind.
        kind: String,
        /// `namespace/name` or `name`.
        name: String,
        /// Why.
        source: InjectError,
    },
    /// A workload has no pod template.
    #[error("{kind} {name:?}: spec.template is required value")]
    NoTemplate {
        /// The workload's kind.
        kind: String,
        /// Its name.
        name: String,
    },
}

/// Settings of an offline injection.
#[derive(Debug)]
pub struct KubeInject<'a> {
    /// The injector config (templates).
    pub config: &'a InjectConfig,
    /// The Helm values.
    pub values: &'a Values,
    /// The effective mesh config (proto-JSON).
    pub mesh: Json,
    /// The revision (`""` = default).
    pub revision: String,
    /// Native sidecars (`ENABLE_NATIVE_SIDECARS=true`; istioctl has no nodes to look at).
    pub native_sidecar: bool,
}

/// Where a workload kind keeps the metadata and the pod spec that are injected (`None`: not a
/// workload). A CronJob's are its job template's metadata and its pod template's spec, as istioctl
/// takes them (`IntoObject`: the pod template's own metadata is not read or changed).
type Path = &'static [&'static str];

fn template_paths(kind: &str) -> Option<(Path, Path)> {
    match kind {
        "Pod" => Some((&["metadata"], &["spec"])),
        "CronJob" => {
            Some((&["spec", "jobTemplate", "metadata"], &["spec", "jobTemplate", "spec", "template", "spec"]))
        }
        "Deployment"
        | "DaemonSet"
        | "StatefulSet"
        | "ReplicaSet"
        | "Job"
        | "ReplicationController"
        | "DeploymentConfig" => Some((&["spec", "template", "metadata"], &["spec", "template", "spec"])),
        _ => None,
    }
}

fn at_mut<'j>(value: &'j mut Json, path: &[&str]) -> Option<&'j mut Json> {
    path.iter().try_fold(value, |v, k| v.get_mut(*k))
}

impl KubeInject<'_> {
    /// Injects one object; objects that are not workloads come back unchanged. `warnings` gets
    /// istioctl's "Skipping injection" lines.
    ///
    /// # Errors
    /// [`ResourceError`].
    pub fn object(&self, object: Json, warnings: &mut Vec<String>) -> Result<Json, ResourceError> {
        let mut object = self.inject_object(object, warnings)?;
        // istioctl decodes every object of its scheme into its Go type and writes that back, whether
        // it injected it or not.
        crate::kube_types::normalize_object(&mut object);
        Ok(object)
    }

    fn inject_object(&self, mut object: Json, warnings: &mut Vec<String>) -> Result<Json, ResourceError> {
        let kind = object["kind"].as_str().unwrap_or_default().to_string();
        if kind == "List" {
            if let Some(items) = object.get_mut("items").and_then(Json::as_array_mut) {
                for item in items.iter_mut() {
                    *item = self.inject_object(item.take(), warnings)?;
                }
            }
            return Ok(object);
        }
        let Some((meta_path, spec_path)) = template_paths(&kind) else { return Ok(object) };
        let meta = &object["metadata"];
        let object_name = meta["name"].as_str().unwrap_or_default().to_string();
        let object_namespace = meta["namespace"].as_str().unwrap_or_default().to_string();
        let api_version = object["apiVersion"].as_str().unwrap_or_default().to_string();
        if at_mut(&mut object, &spec_path[..spec_path.len() - 1]).is_none() {
            return Err(ResourceError::NoTemplate { kind, name: object_name });
        }
        let pod = serde_json::json!({
            "metadata": at_mut(&mut object, meta_path).map(|m| m.clone()).unwrap_or_else(|| serde_json::json!({})),
            "spec": at_mut(&mut object, spec_path).map(|s| s.clone()).unwrap_or_else(|| serde_json::json!({})),
        });
        let owner = if kind == "Pod" {
            owner_of_pod(&pod)
        } else {
            Owner {
                name: object_name.clone(),
                namespace: object_namespace.clone(),
                kind: kind.clone(),
                api_version,
            }
        };
        let name = Some(pod["metadata"]["name"].as_str().unwrap_or_default())
            .filter(|n| !n.is_empty())
            .unwrap_or(&owner.name)
            .to_string();
        let namespace = Some(pod["metadata"]["namespace"].as_str().unwrap_or_default())
            .filter(|n| !n.is_empty())
            .unwrap_or(&owner.namespace)
            .to_string();
        let full_name =
            if owner.namespace.is_empty() { name.clone() } else { format!("{}/{}", owner.namespace, name) };
        let what = if kind.is_empty() { format!("{full_name:?}") } else { format!("{kind} {full_name:?}") };
        if pod["spec"]["hostNetwork"].as_bool() == Some(true) {
            warnings.push(format!("===> Skipping injection because {what} has host networking enabled"));
            return Ok(object);
        }
        if !inject_required(IGNORED_NAMESPACES, &Policy::Enabled, None, &pod, &namespace) {
            warnings.push(format!("===> Skipping injection because {what} has sidecar injection disabled"));
            return Ok(object);
        }
        let params = InjectionParams {
            pod,
            owner,
            config: self.config,
            default_templates: vec![SIDECAR_TEMPLATE.to_string()],
            aliases: BTreeMap::new(),
            mesh: self.mesh.clone(),
            // istioctl has no ProxyConfig resources: mesh defaultConfig and the annotation only.
            proxy_config: None,
            values: self.values,
            revision: self.revision.clone(),
            native_sidecar: self.native_sidecar,
            proxy_envs: BTreeMap::new(),
            injected_annotations: BTreeMap::new(),
            proxy_uid_gid: (1337, 1337),
        };
        let injected = inject_pod(params).map_err(|source| ResourceError::Inject {
            kind: kind.clone(),
            name: full_name,
            source,
        })?;
        for (path, key) in [(meta_path, "metadata"), (spec_path, "spec")] {
            let (last, parents) = path.split_last().expect("paths are not empty");
            if let Some(parent) = at_mut(&mut object, parents).and_then(Json::as_object_mut) {
                parent.insert((*last).to_string(), injected[key].clone());
            }
        }
        Ok(object)
    }

    /// Injects every document of a YAML stream; the output is the documents in order, each followed
    /// by `---`.
    ///
    /// # Errors
    /// [`ResourceError`] for the first document that fails.
    pub fn stream(&self, yaml: &str, warnings: &mut Vec<String>) -> Result<String, ResourceError> {
        let docs = crate::yaml::documents(yaml)?;
        let mut out = String::new();
        for doc in docs {
            if doc.is_null() {
                continue;
            }
            out.push_str(&yaml_text(&self.object(doc, warnings)?));
            out.push_str("---\n");
        }
        Ok(out)
    }
}
