//! The mesh config fields that drive Ingress support, and the class rule deciding which Ingresses are
//! Istio's.
//!
//! Istio's defaults (`pkg/config/mesh` `DefaultMeshConfig`): `ingressControllerMode: STRICT`,
//! `ingressClass: istio`, `ingressService: istio-ingressgateway`, no `ingressSelector`. The namespace
//! of the generated Gateways and of the ingress Service is istiod's `K8S_INGRESS_NS` (default
//! `istio-system`).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::{INGRESS_CLASS_ANNOTATION, ISTIO_INGRESS_CONTROLLER, types::Ingress, types::IngressClass};

/// Mesh config `ingressControllerMode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IngressControllerMode {
    /// `UNSPECIFIED`: treated as invalid (no Ingress is processed), as in Istio.
    Unspecified,
    /// `OFF`: no Ingress is processed.
    Off,
    /// `DEFAULT`: Ingresses without a class, and those whose annotation names `ingressClass`.
    Default,
    /// `STRICT`: only Ingresses whose annotation names `ingressClass` (or whose IngressClass is Istio's).
    Strict,
}

impl IngressControllerMode {
    /// The proto enum name (`STRICT`).
    pub fn as_str(self) -> &'static str {
        match self {
            IngressControllerMode::Unspecified => "UNSPECIFIED",
            IngressControllerMode::Off => "OFF",
            IngressControllerMode::Default => "DEFAULT",
            IngressControllerMode::Strict => "STRICT",
        }
    }

    /// From the proto enum name or number (protojson accepts both).
    pub fn parse(value: &Value) -> Option<IngressControllerMode> {
        match value {
            Value::String(s) => match s.as_str() {
                "UNSPECIFIED" => Some(IngressControllerMode::Unspecified),
                "OFF" => Some(IngressControllerMode::Off),
                "DEFAULT" => Some(IngressControllerMode::Default),
                "STRICT" => Some(IngressControllerMode::Strict),
                _ => None,
            },
            Value::Number(n) => match n.as_i64()? {
                0 => Some(IngressControllerMode::Unspecified),
                1 => Some(IngressControllerMode::Off),
                2 => Some(IngressControllerMode::Default),
                3 => Some(IngressControllerMode::Strict),
                _ => None,
            },
            _ => None,
        }
    }
}

/// What the Ingress support reads from the mesh config (and `K8S_INGRESS_NS`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IngressSettings {
    /// `ingressControllerMode`.
    pub mode: IngressControllerMode,
    /// `ingressClass`: the annotation value that marks Istio's Ingresses.
    pub ingress_class: String,
    /// `ingressService`: the Service (in [`IngressSettings::namespace`]) whose addresses are written to
    /// Ingress status, and the default gateway selector when not `istio-ingressgateway`.
    pub ingress_service: String,
    /// `ingressSelector`: the `istio` label value of the gateway pods serving Ingresses.
    pub ingress_selector: String,
    /// Namespace of the generated Gateways and of the ingress Service (`K8S_INGRESS_NS`).
    pub namespace: String,
}

impl Default for IngressSettings {
    /// Istio's defaults.
    fn default() -> Self {
        IngressSettings {
            mode: IngressControllerMode::Strict,
            ingress_class: "istio".into(),
            ingress_service: "istio-ingressgateway".into(),
            ingress_selector: String::new(),
            namespace: "istio-system".into(),
        }
    }
}

impl IngressSettings {
    /// The settings of a mesh config (as JSON, the fields given overriding Istio's defaults). Returns
    /// warnings for values of the wrong shape (the default is kept).
    pub fn from_mesh_json(mesh: &Value) -> (IngressSettings, Vec<String>) {
        let mut out = IngressSettings::default();
        let mut warnings = Vec::new();
        if let Some(v) = mesh.get("ingressControllerMode") {
            match IngressControllerMode::parse(v) {
                Some(mode) => out.mode = mode,
                None => warnings.push(format!(
                    "ingressControllerMode: unknown mode {v} (OFF, DEFAULT or STRICT); using {}",
                    out.mode.as_str()
                )),
            }
        }
        for (field, target) in [
            ("ingressClass", &mut out.ingress_class),
            ("ingressService", &mut out.ingress_service),
            ("ingressSelector", &mut out.ingress_selector),
        ] {
            match mesh.get(field) {
                None => {}
                Some(Value::String(s)) => *target = s.clone(),
                Some(other) => {
                    warnings.push(format!("{field}: expected a string, got {other}; using {target:?}"))
                }
            }
        }
        (out, warnings)
    }

    /// The selector of the generated Gateways (Istio's `getIngressGatewaySelector`): `istio:
    /// <ingressSelector>` when set; else `istio: <ingressService>` when that is set and not
    /// `istio-ingressgateway`; else `istio: ingressgateway`.
    pub fn gateway_selector(&self) -> BTreeMap<String, String> {
        let value = if !self.ingress_selector.is_empty() {
            self.ingress_selector.clone()
        } else if !self.ingress_service.is_empty() && self.ingress_service != "istio-ingressgateway" {
            self.ingress_service.clone()
        } else {
            "ingressgateway".to_string()
        };
        BTreeMap::from([("istio".to_string(), value)])
    }
}

/// Whether Istio handles `ingress` (Istio's `shouldProcessIngressWithClass`), `class` being the
/// IngressClass its `spec.ingressClassName` names, if that exists:
/// 1. with the `kubernetes.io/ingress.class` annotation: the annotation must equal `ingressClass`
///    (modes `DEFAULT` and `STRICT`; never with `OFF` or `UNSPECIFIED`);
/// 2. else with an IngressClass: its controller must be `istio.io/ingress-controller` (whatever the
///    mode, even `OFF`, as in Istio);
/// 3. else: only in mode `DEFAULT`.
pub fn should_process(settings: &IngressSettings, ingress: &Ingress, class: Option<&IngressClass>) -> bool {
    if let Some(annotation) = ingress.metadata.annotations.get(INGRESS_CLASS_ANNOTATION) {
        match settings.mode {
            IngressControllerMode::Default | IngressControllerMode::Strict => {
                *annotation == settings.ingress_class
            }
            IngressControllerMode::Off | IngressControllerMode::Unspecified => false,
        }
    } else if let Some(class) = class {
        class.spec.controller == ISTIO_INGRESS_CONTROLLER
    } else {
        settings.mode == IngressControllerMode::Default
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ingress(annotation: Option<&str>) -> Ingress {
        let mut i = Ingress::default();
        if let Some(a) = annotation {
            i.metadata.annotations.insert(INGRESS_CLASS_ANNOTATION.into(), a.into());
        }
        i
    }

    fn class(controller: &str) -> IngressClass {
        let mut c = IngressClass::default();
        c.spec.controller = controller.into();
        c
    }

    #[test]
    fn class_rules_follow_istio_in_every_mode() {
        let mode = |m| IngressSettings { mode: m, ..IngressSettings::default() };
        let (strict, default, off) = (
            mode(IngressControllerMode::Strict),
            mode(IngressControllerMode::Default),
            mode(IngressControllerMode::Off),
        );
        // Annotation: must name ingressClass, except with OFF.
        assert!(should_process(&strict, &ingress(Some("istio")), None));
        assert!(!should_process(&strict, &ingress(Some("nginx")), None));
        assert!(!should_process(&default, &ingress(Some("nginx")), None));
        assert!(!should_process(&off, &ingress(Some("istio")), None));
        // The annotation wins over the IngressClass.
        assert!(!should_process(&strict, &ingress(Some("nginx")), Some(&class(ISTIO_INGRESS_CONTROLLER))));
        // IngressClass: its controller decides, whatever the mode.
        assert!(should_process(&off, &ingress(None), Some(&class(ISTIO_INGRESS_CONTROLLER))));
        assert!(!should_process(&default, &ingress(None), Some(&class("k8s.io/ingress-nginx"))));
        // Neither: DEFAULT only.
        assert!(should_process(&default, &ingress(None), None));
        assert!(!should_process(&strict, &ingress(None), None));
        assert!(!should_process(&mode(IngressControllerMode::Unspecified), &ingress(Some("istio")), None));
    }

    #[test]
    fn mesh_fields_override_the_defaults_and_bad_values_warn() {
        let (s, w) = IngressSettings::from_mesh_json(&json!({}));
        assert_eq!((s, w.len()), (IngressSettings::default(), 0));
        let (s, w) = IngressSettings::from_mesh_json(
            &json!({"ingressControllerMode": "DEFAULT", "ingressClass": "mine", "ingressService": "edge"}),
        );
        assert!(w.is_empty());
        assert_eq!((s.mode, s.ingress_class.as_str()), (IngressControllerMode::Default, "mine"));
        assert_eq!(s.gateway_selector()["istio"], "edge");
        let (s, w) = IngressSettings::from_mesh_json(
            &json!({"ingressControllerMode": "SOMETIMES", "ingressClass": 3}),
        );
        assert_eq!(s.mode, IngressControllerMode::Strict);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].starts_with("ingressControllerMode: unknown mode"), "{w:?}");
    }

    #[test]
    fn selector_prefers_ingress_selector_then_a_non_default_service() {
        let mut s = IngressSettings::default();
        assert_eq!(s.gateway_selector()["istio"], "ingressgateway");
        s.ingress_service = String::new();
        assert_eq!(s.gateway_selector()["istio"], "ingressgateway");
        s.ingress_service = "my-gw".into();
        s.ingress_selector = "sel".into();
        assert_eq!(s.gateway_selector()["istio"], "sel");
    }
}
