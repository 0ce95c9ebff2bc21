//! Istio's analysis message catalogue as data: one [`MessageType`] per code of Istio's
//! `pkg/config/analysis/msg/messages.yaml` (istio/istio @ 86c9f01f, 2026-08-22): code, name, level and
//! the Go `fmt` template the message text is rendered from. Generated from that file; keep the order by code.

use super::{Level, MessageType};

/// IST0001 InternalError (Error): There was an internal error in the toolchain. This is almost always a bug in the implementation.
pub static INTERNAL_ERROR: MessageType = MessageType {
    code: "IST0001",
    name: "InternalError",
    level: Level::Error,
    template: "Internal error: %v",
    description: "There was an internal error in the toolchain. This is almost always a bug in the implementation.",
};
/// IST0002 Deprecated (Warning): A feature that the configuration is depending on is now deprecated.
pub static DEPRECATED: MessageType = MessageType {
    code: "IST0002",
    name: "Deprecated",
    level: Level::Warning,
    template: "Deprecated: %s",
    description: "A feature that the configuration is depending on is now deprecated.",
};
/// IST0101 ReferencedResourceNotFound (Error): A resource being referenced does not exist.
pub static REFERENCED_RESOURCE_NOT_FOUND: MessageType = MessageType {
    code: "IST0101",
    name: "ReferencedResourceNotFound",
    level: Level::Error,
    template: "Referenced %s not found: %q",
    description: "A resource being referenced does not exist.",
};
/// IST0102 NamespaceNotInjected (Info): A namespace is not enabled for Istio injection.
pub static NAMESPACE_NOT_INJECTED: MessageType = MessageType {
    code: "IST0102",
    name: "NamespaceNotInjected",
    level: Level::Info,
    template: "The namespace is not enabled for Istio injection. Run 'kubectl label namespace %s istio-injection=enabled' to enable it, or 'kubectl label namespace %s istio-injection=disabled' to explicitly mark it as not needing injection.",
    description: "A namespace is not enabled for Istio injection.",
};
/// IST0103 PodMissingProxy (Warning): A pod is missing the Istio proxy.
pub static POD_MISSING_PROXY: MessageType = MessageType {
    code: "IST0103",
    name: "PodMissingProxy",
    level: Level::Warning,
    template: "The pod %s is missing the Istio proxy. This can often be resolved by restarting or redeploying the workload.",
    description: "A pod is missing the Istio proxy.",
};
/// IST0106 SchemaValidationError (Error): The resource has a schema validation error.
pub static SCHEMA_VALIDATION_ERROR: MessageType = MessageType {
    code: "IST0106",
    name: "SchemaValidationError",
    level: Level::Error,
    template: "Schema validation error: %v",
    description: "The resource has a schema validation error.",
};
/// IST0107 MisplacedAnnotation (Warning): An Istio annotation is applied to the wrong kind of resource.
pub static MISPLACED_ANNOTATION: MessageType = MessageType {
    code: "IST0107",
    name: "MisplacedAnnotation",
    level: Level::Warning,
    template: "Misplaced annotation: %s can only be applied to %s",
    description: "An Istio annotation is applied to the wrong kind of resource.",
};
/// IST0108 UnknownAnnotation (Warning): An Istio annotation is not recognized for any kind of resource
pub static UNKNOWN_ANNOTATION: MessageType = MessageType {
    code: "IST0108",
    name: "UnknownAnnotation",
    level: Level::Warning,
    template: "Unknown annotation: %s",
    description: "An Istio annotation is not recognized for any kind of resource",
};
/// IST0109 ConflictingMeshGatewayVirtualServiceHosts (Error): Conflicting hosts on VirtualServices associated with mesh gateway
pub static CONFLICTING_MESH_GATEWAY_VIRTUAL_SERVICE_HOSTS: MessageType = MessageType {
    code: "IST0109",
    name: "ConflictingMeshGatewayVirtualServiceHosts",
    level: Level::Error,
    template: "The VirtualServices %s associated with mesh gateway define the same host %s which can lead to undefined behavior. This can be fixed by merging the conflicting VirtualServices into a single resource.",
    description: "Conflicting hosts on VirtualServices associated with mesh gateway",
};
/// IST0110 ConflictingSidecarWorkloadSelectors (Error): A Sidecar resource selects the same workloads as another Sidecar resource
pub static CONFLICTING_SIDECAR_WORKLOAD_SELECTORS: MessageType = MessageType {
    code: "IST0110",
    name: "ConflictingSidecarWorkloadSelectors",
    level: Level::Error,
    template: "The Sidecars %v in namespace %q select the same workload pod %q, which can lead to undefined behavior.",
    description: "A Sidecar resource selects the same workloads as another Sidecar resource",
};
/// IST0111 MultipleSidecarsWithoutWorkloadSelectors (Error): More than one sidecar resource in a namespace has no workload selector
pub static MULTIPLE_SIDECARS_WITHOUT_WORKLOAD_SELECTORS: MessageType = MessageType {
    code: "IST0111",
    name: "MultipleSidecarsWithoutWorkloadSelectors",
    level: Level::Error,
    template: "The Sidecars %v in namespace %q have no workload selector, which can lead to undefined behavior.",
    description: "More than one sidecar resource in a namespace has no workload selector",
};
/// IST0112 VirtualServiceDestinationPortSelectorRequired (Error): A VirtualService routes to a service with more than one port exposed, but does not specify which to use.
pub static VIRTUAL_SERVICE_DESTINATION_PORT_SELECTOR_REQUIRED: MessageType = MessageType {
    code: "IST0112",
    name: "VirtualServiceDestinationPortSelectorRequired",
    level: Level::Error,
    template: "This VirtualService routes to a service %q that exposes multiple ports %v. Specifying a port in the destination is required to disambiguate.",
    description: "A VirtualService routes to a service with more than one port exposed, but does not specify which to use.",
};
/// IST0116 DeploymentAssociatedToMultipleServices (Warning): The resulting pods of a service mesh deployment can't be associated with multiple services using the same port but different protocols.
pub static DEPLOYMENT_ASSOCIATED_TO_MULTIPLE_SERVICES: MessageType = MessageType {
    code: "IST0116",
    name: "DeploymentAssociatedToMultipleServices",
    level: Level::Warning,
    template: "This deployment %s is associated with multiple services using port %d but different protocols: %v",
    description: "The resulting pods of a service mesh deployment can't be associated with multiple services using the same port but different protocols.",
};
/// IST0118 PortNameIsNotUnderNamingConvention (Info): Port name is not under naming convention. Protocol detection is applied to the port.
pub static PORT_NAME_IS_NOT_UNDER_NAMING_CONVENTION: MessageType = MessageType {
    code: "IST0118",
    name: "PortNameIsNotUnderNamingConvention",
    level: Level::Info,
    template: "Port name %s (port: %d, targetPort: %s) doesn't follow the naming convention of Istio port.",
    description: "Port name is not under naming convention. Protocol detection is applied to the port.",
};
/// IST0123 NamespaceMultipleInjectionLabels (Warning): A namespace has more than one type of injection labels
pub static NAMESPACE_MULTIPLE_INJECTION_LABELS: MessageType = MessageType {
    code: "IST0123",
    name: "NamespaceMultipleInjectionLabels",
    level: Level::Warning,
    template: "The namespace has more than one type of injection labels %v, which may lead to undefined behavior. Make sure only one injection label exists.",
    description: "A namespace has more than one type of injection labels",
};
/// IST0125 InvalidAnnotation (Warning): An Istio annotation that is not valid
pub static INVALID_ANNOTATION: MessageType = MessageType {
    code: "IST0125",
    name: "InvalidAnnotation",
    level: Level::Warning,
    template: "Invalid annotation %s: %s",
    description: "An Istio annotation that is not valid",
};
/// IST0126 UnknownMeshNetworksServiceRegistry (Error): A service registry in Mesh Networks is unknown
pub static UNKNOWN_MESH_NETWORKS_SERVICE_REGISTRY: MessageType = MessageType {
    code: "IST0126",
    name: "UnknownMeshNetworksServiceRegistry",
    level: Level::Error,
    template: "Unknown service registry %s in network %s",
    description: "A service registry in Mesh Networks is unknown",
};
/// IST0127 NoMatchingWorkloadsFound (Warning): There aren't workloads matching the resource labels
pub static NO_MATCHING_WORKLOADS_FOUND: MessageType = MessageType {
    code: "IST0127",
    name: "NoMatchingWorkloadsFound",
    level: Level::Warning,
    template: "No matching workloads for this resource with the following labels: %s",
    description: "There aren't workloads matching the resource labels",
};
/// IST0128 NoServerCertificateVerificationDestinationLevel (Warning): No caCertificates are set in DestinationRule, this results in no verification of presented server certificate.
pub static NO_SERVER_CERTIFICATE_VERIFICATION_DESTINATION_LEVEL: MessageType = MessageType {
    code: "IST0128",
    name: "NoServerCertificateVerificationDestinationLevel",
    level: Level::Warning,
    template: "DestinationRule %s in namespace %s has TLS mode set to %s but no caCertificates are set to validate server identity for host: %s",
    description: "No caCertificates are set in DestinationRule, this results in no verification of presented server certificate.",
};
/// IST0129 NoServerCertificateVerificationPortLevel (Warning): No caCertificates are set in DestinationRule, this results in no verification of presented server certificate for traffic to a given port.
pub static NO_SERVER_CERTIFICATE_VERIFICATION_PORT_LEVEL: MessageType = MessageType {
    code: "IST0129",
    name: "NoServerCertificateVerificationPortLevel",
    level: Level::Warning,
    template: "DestinationRule %s in namespace %s has TLS mode set to %s but no caCertificates are set to validate server identity for host: %s at port %s",
    description: "No caCertificates are set in DestinationRule, this results in no verification of presented server certificate for traffic to a given port.",
};
/// IST0130 VirtualServiceUnreachableRule (Warning): A VirtualService rule will never be used because a previous rule uses the same match.
pub static VIRTUAL_SERVICE_UNREACHABLE_RULE: MessageType = MessageType {
    code: "IST0130",
    name: "VirtualServiceUnreachableRule",
    level: Level::Warning,
    template: "VirtualService rule %v not used (%s).",
    description: "A VirtualService rule will never be used because a previous rule uses the same match.",
};
/// IST0131 VirtualServiceIneffectiveMatch (Info): A VirtualService rule match duplicates a match in a previous rule.
pub static VIRTUAL_SERVICE_INEFFECTIVE_MATCH: MessageType = MessageType {
    code: "IST0131",
    name: "VirtualServiceIneffectiveMatch",
    level: Level::Info,
    template: "VirtualService rule %v match %v is not used (duplicate/overlapping match in rule %v).",
    description: "A VirtualService rule match duplicates a match in a previous rule.",
};
/// IST0132 VirtualServiceHostNotFoundInGateway (Warning): Host defined in VirtualService not found in Gateway.
pub static VIRTUAL_SERVICE_HOST_NOT_FOUND_IN_GATEWAY: MessageType = MessageType {
    code: "IST0132",
    name: "VirtualServiceHostNotFoundInGateway",
    level: Level::Warning,
    template: "one or more host %v defined in VirtualService %s not found in Gateway %s.",
    description: "Host defined in VirtualService not found in Gateway.",
};
/// IST0133 SchemaWarning (Warning): The resource has a schema validation warning.
pub static SCHEMA_WARNING: MessageType = MessageType {
    code: "IST0133",
    name: "SchemaWarning",
    level: Level::Warning,
    template: "Schema validation warning: %v",
    description: "The resource has a schema validation warning.",
};
/// IST0134 ServiceEntryAddressesRequired (Warning): Virtual IP addresses are required for ports serving TCP (or unset) protocol when PILOT_ENABLE_IP_AUTOALLOCATE is not set on a proxy
pub static SERVICE_ENTRY_ADDRESSES_REQUIRED: MessageType = MessageType {
    code: "IST0134",
    name: "ServiceEntryAddressesRequired",
    level: Level::Warning,
    template: "ServiceEntry addresses are required for this protocol.",
    description: "Virtual IP addresses are required for ports serving TCP (or unset) protocol when PILOT_ENABLE_IP_AUTOALLOCATE is not set on a proxy",
};
/// IST0135 DeprecatedAnnotation (Info): A resource is using a deprecated Istio annotation.
pub static DEPRECATED_ANNOTATION: MessageType = MessageType {
    code: "IST0135",
    name: "DeprecatedAnnotation",
    level: Level::Info,
    template: "Annotation %q has been deprecated%s and may not work in future Istio versions.",
    description: "A resource is using a deprecated Istio annotation.",
};
/// IST0136 AlphaAnnotation (Info): An Istio annotation may not be suitable for production.
pub static ALPHA_ANNOTATION: MessageType = MessageType {
    code: "IST0136",
    name: "AlphaAnnotation",
    level: Level::Info,
    template: "Annotation %q is part of an alpha-phase feature and may be incompletely supported.",
    description: "An Istio annotation may not be suitable for production.",
};
/// IST0137 DeploymentConflictingPorts (Warning): Two services selecting the same workload with the same targetPort MUST refer to the same port.
pub static DEPLOYMENT_CONFLICTING_PORTS: MessageType = MessageType {
    code: "IST0137",
    name: "DeploymentConflictingPorts",
    level: Level::Warning,
    template: "This deployment %s is associated with multiple services %v using targetPort %q but different ports: %v.",
    description: "Two services selecting the same workload with the same targetPort MUST refer to the same port.",
};
/// IST0138 GatewayDuplicateCertificate (Warning): Duplicate certificate in multiple gateways may cause 404s if clients re-use HTTP2 connections.
pub static GATEWAY_DUPLICATE_CERTIFICATE: MessageType = MessageType {
    code: "IST0138",
    name: "GatewayDuplicateCertificate",
    level: Level::Warning,
    template: "Duplicate certificate in multiple gateways %v may cause 404s if clients re-use HTTP2 connections.",
    description: "Duplicate certificate in multiple gateways may cause 404s if clients re-use HTTP2 connections.",
};
/// IST0139 InvalidWebhook (Error): Webhook is invalid or references a control plane service that does not exist.
pub static INVALID_WEBHOOK: MessageType = MessageType {
    code: "IST0139",
    name: "InvalidWebhook",
    level: Level::Error,
    template: "%v",
    description: "Webhook is invalid or references a control plane service that does not exist.",
};
/// IST0140 IngressRouteRulesNotAffected (Warning): Route rules have no effect on ingress gateway requests
pub static INGRESS_ROUTE_RULES_NOT_AFFECTED: MessageType = MessageType {
    code: "IST0140",
    name: "IngressRouteRulesNotAffected",
    level: Level::Warning,
    template: "Subset in virtual service %s has no effect on ingress gateway %s requests",
    description: "Route rules have no effect on ingress gateway requests",
};
/// IST0141 InsufficientPermissions (Error): Required permissions to install Istio are missing.
pub static INSUFFICIENT_PERMISSIONS: MessageType = MessageType {
    code: "IST0141",
    name: "InsufficientPermissions",
    level: Level::Error,
    template: "Missing required permission to create resource %v (%v)",
    description: "Required permissions to install Istio are missing.",
};
/// IST0142 UnsupportedKubernetesVersion (Error): The Kubernetes version is not supported
pub static UNSUPPORTED_KUBERNETES_VERSION: MessageType = MessageType {
    code: "IST0142",
    name: "UnsupportedKubernetesVersion",
    level: Level::Error,
    template: "The Kubernetes Version %q is lower than the minimum version: %v",
    description: "The Kubernetes version is not supported",
};
/// IST0143 LocalhostListener (Error): A port exposed in a Service is bound to a localhost address
pub static LOCALHOST_LISTENER: MessageType = MessageType {
    code: "IST0143",
    name: "LocalhostListener",
    level: Level::Error,
    template: "Port %v is exposed in a Service but listens on localhost. It will not be exposed to other pods.",
    description: "A port exposed in a Service is bound to a localhost address",
};
/// IST0144 InvalidApplicationUID (Warning): Application pods should not run as user ID (UID) 1337
pub static INVALID_APPLICATION_UID: MessageType = MessageType {
    code: "IST0144",
    name: "InvalidApplicationUID",
    level: Level::Warning,
    template: "User ID (UID) 1337 is reserved for the sidecar proxy.",
    description: "Application pods should not run as user ID (UID) 1337",
};
/// IST0145 ConflictingGateways (Error): Gateway should not have the same selector, port and matched hosts of server
pub static CONFLICTING_GATEWAYS: MessageType = MessageType {
    code: "IST0145",
    name: "ConflictingGateways",
    level: Level::Error,
    template: "Conflict with gateways %s (workload selector %s, port %s, hosts %v).",
    description: "Gateway should not have the same selector, port and matched hosts of server",
};
/// IST0146 ImageAutoWithoutInjectionWarning (Warning): Deployments with `image: auto` should be targeted for injection.
pub static IMAGE_AUTO_WITHOUT_INJECTION_WARNING: MessageType = MessageType {
    code: "IST0146",
    name: "ImageAutoWithoutInjectionWarning",
    level: Level::Warning,
    template: "%s %s contains `image: auto` but does not match any Istio injection webhook selectors.",
    description: "Deployments with `image: auto` should be targeted for injection.",
};
/// IST0147 ImageAutoWithoutInjectionError (Error): Pods with `image: auto` should be targeted for injection.
pub static IMAGE_AUTO_WITHOUT_INJECTION_ERROR: MessageType = MessageType {
    code: "IST0147",
    name: "ImageAutoWithoutInjectionError",
    level: Level::Error,
    template: "%s %s contains `image: auto` but does not match any Istio injection webhook selectors.",
    description: "Pods with `image: auto` should be targeted for injection.",
};
/// IST0148 NamespaceInjectionEnabledByDefault (Info): user namespace should be injectable if Istio is installed with enableNamespacesByDefault enabled and neither injection label is set.
pub static NAMESPACE_INJECTION_ENABLED_BY_DEFAULT: MessageType = MessageType {
    code: "IST0148",
    name: "NamespaceInjectionEnabledByDefault",
    level: Level::Info,
    template: "is enabled for Istio injection, as Istio is installed with enableNamespacesByDefault as true.",
    description: "user namespace should be injectable if Istio is installed with enableNamespacesByDefault enabled and neither injection label is set.",
};
/// IST0149 JwtClaimBasedRoutingWithoutRequestAuthN (Error): Virtual service using JWT claim based routing without request authentication.
pub static JWT_CLAIM_BASED_ROUTING_WITHOUT_REQUEST_AUTHN: MessageType = MessageType {
    code: "IST0149",
    name: "JwtClaimBasedRoutingWithoutRequestAuthN",
    level: Level::Error,
    template: "The virtual service uses the JWT claim based routing (key: %s) but found no request authentication for the gateway (%s) pod (%s). The request authentication must first be applied for the gateway pods to validate the JWT token and make the claims available for routing.",
    description: "Virtual service using JWT claim based routing without request authentication.",
};
/// IST0150 ExternalNameServiceTypeInvalidPortName (Warning): Proxy may prevent tcp named ports and unmatched traffic for ports serving TCP protocol from being forwarded correctly for ExternalName services.
pub static EXTERNAL_NAME_SERVICE_TYPE_INVALID_PORT_NAME: MessageType = MessageType {
    code: "IST0150",
    name: "ExternalNameServiceTypeInvalidPortName",
    level: Level::Warning,
    template: "Port name for ExternalName service is invalid. Proxy may prevent tcp named ports and unmatched traffic for ports serving TCP protocol from being forwarded correctly",
    description: "Proxy may prevent tcp named ports and unmatched traffic for ports serving TCP protocol from being forwarded correctly for ExternalName services.",
};
/// IST0151 EnvoyFilterUsesRelativeOperation (Warning): This EnvoyFilter does not have a priority and has a relative patch operation set which can cause the EnvoyFilter not to be applied. Using the INSERT_FIRST or ADD option or setting the priority may help in ensuring the EnvoyFilter is applied correctly.
pub static ENVOY_FILTER_USES_RELATIVE_OPERATION: MessageType = MessageType {
    code: "IST0151",
    name: "EnvoyFilterUsesRelativeOperation",
    level: Level::Warning,
    template: "This EnvoyFilter does not have a priority and has a relative patch operation set which can cause the EnvoyFilter not to be applied. Using the INSERT_FIRST of ADD option or setting the priority may help in ensuring the EnvoyFilter is applied correctly.",
    description: "This EnvoyFilter does not have a priority and has a relative patch operation set which can cause the EnvoyFilter not to be applied. Using the INSERT_FIRST or ADD option or setting the priority may help in ensuring the EnvoyFilter is applied correctly.",
};
/// IST0152 EnvoyFilterUsesReplaceOperationIncorrectly (Error): The REPLACE operation is only valid for HTTP_FILTER and NETWORK_FILTER.
pub static ENVOY_FILTER_USES_REPLACE_OPERATION_INCORRECTLY: MessageType = MessageType {
    code: "IST0152",
    name: "EnvoyFilterUsesReplaceOperationIncorrectly",
    level: Level::Error,
    template: "The REPLACE operation is only valid for HTTP_FILTER and NETWORK_FILTER.",
    description: "The REPLACE operation is only valid for HTTP_FILTER and NETWORK_FILTER.",
};
/// IST0153 EnvoyFilterUsesAddOperationIncorrectly (Error): The ADD operation will be ignored when applyTo is set to ROUTE_CONFIGURATION, or HTTP_ROUTE.
pub static ENVOY_FILTER_USES_ADD_OPERATION_INCORRECTLY: MessageType = MessageType {
    code: "IST0153",
    name: "EnvoyFilterUsesAddOperationIncorrectly",
    level: Level::Error,
    template: "The ADD operation will be ignored when applyTo is set to ROUTE_CONFIGURATION, or HTTP_ROUTE.",
    description: "The ADD operation will be ignored when applyTo is set to ROUTE_CONFIGURATION, or HTTP_ROUTE.",
};
/// IST0154 EnvoyFilterUsesRemoveOperationIncorrectly (Error): The REMOVE operation will be ignored when applyTo is set to ROUTE_CONFIGURATION, or HTTP_ROUTE.
pub static ENVOY_FILTER_USES_REMOVE_OPERATION_INCORRECTLY: MessageType = MessageType {
    code: "IST0154",
    name: "EnvoyFilterUsesRemoveOperationIncorrectly",
    level: Level::Error,
    template: "The REMOVE operation will be ignored when applyTo is set to ROUTE_CONFIGURATION, or HTTP_ROUTE.",
    description: "The REMOVE operation will be ignored when applyTo is set to ROUTE_CONFIGURATION, or HTTP_ROUTE.",
};
/// IST0155 EnvoyFilterUsesRelativeOperationWithProxyVersion (Warning): This EnvoyFilter does not have a priority and has a relative patch operation (NSTERT_BEFORE/AFTER, REPLACE, MERGE, DELETE) and proxyVersion set which can cause the EnvoyFilter not to be applied during an upgrade. Using the INSERT_FIRST or ADD option or setting the priority may help in ensuring the EnvoyFilter is applied correctly.
pub static ENVOY_FILTER_USES_RELATIVE_OPERATION_WITH_PROXY_VERSION: MessageType = MessageType {
    code: "IST0155",
    name: "EnvoyFilterUsesRelativeOperationWithProxyVersion",
    level: Level::Warning,
    template: "This EnvoyFilter does not have a priority and has a relative patch operation (NSTERT_BEFORE/AFTER, REPLACE, MERGE, DELETE) and proxyVersion set which can cause the EnvoyFilter not to be applied during an upgrade. Using the INSERT_FIRST or ADD option or setting the priority may help in ensuring the EnvoyFilter is applied correctly.",
    description: "This EnvoyFilter does not have a priority and has a relative patch operation (NSTERT_BEFORE/AFTER, REPLACE, MERGE, DELETE) and proxyVersion set which can cause the EnvoyFilter not to be applied during an upgrade. Using the INSERT_FIRST or ADD option or setting the priority may help in ensuring the EnvoyFilter is applied correctly.",
};
/// IST0156 UnsupportedGatewayAPIVersion (Error): The Gateway API CRD version is not supported
pub static UNSUPPORTED_GATEWAY_API_VERSION: MessageType = MessageType {
    code: "IST0156",
    name: "UnsupportedGatewayAPIVersion",
    level: Level::Error,
    template: "The Gateway API CRD version %v is lower than the minimum version: %v",
    description: "The Gateway API CRD version is not supported",
};
/// IST0157 InvalidTelemetryProvider (Warning): The Telemetry with empty providers will be ignored
pub static INVALID_TELEMETRY_PROVIDER: MessageType = MessageType {
    code: "IST0157",
    name: "InvalidTelemetryProvider",
    level: Level::Warning,
    template: "The Telemetry %v in namespace %q with empty providers will be ignored.",
    description: "The Telemetry with empty providers will be ignored",
};
/// IST0158 PodsIstioProxyImageMismatchInNamespace (Warning): The Istio proxy image of the pods running in the namespace do not match the image defined in the injection configuration.
pub static PODS_ISTIO_PROXY_IMAGE_MISMATCH_IN_NAMESPACE: MessageType = MessageType {
    code: "IST0158",
    name: "PodsIstioProxyImageMismatchInNamespace",
    level: Level::Warning,
    template: "The Istio proxy images of the pods running in the namespace do not match the image defined in the injection configuration (pod names: %v). This often happens after upgrading the Istio control-plane and can be fixed by redeploying the pods.",
    description: "The Istio proxy image of the pods running in the namespace do not match the image defined in the injection configuration.",
};
/// IST0159 ConflictingTelemetryWorkloadSelectors (Error): A Telemetry resource selects the same workloads as another Telemetry resource
pub static CONFLICTING_TELEMETRY_WORKLOAD_SELECTORS: MessageType = MessageType {
    code: "IST0159",
    name: "ConflictingTelemetryWorkloadSelectors",
    level: Level::Error,
    template: "The Telemetries %v in namespace %q select the same workload pod %q, which can lead to undefined behavior.",
    description: "A Telemetry resource selects the same workloads as another Telemetry resource",
};
/// IST0160 MultipleTelemetriesWithoutWorkloadSelectors (Error): More than one telemetry resource in a namespace has no workload selector
pub static MULTIPLE_TELEMETRIES_WITHOUT_WORKLOAD_SELECTORS: MessageType = MessageType {
    code: "IST0160",
    name: "MultipleTelemetriesWithoutWorkloadSelectors",
    level: Level::Error,
    template: "The Telemetries %v in namespace %q have no workload selector, which can lead to undefined behavior.",
    description: "More than one telemetry resource in a namespace has no workload selector",
};
/// IST0161 InvalidGatewayCredential (Error): The credential provided for the Gateway resource is invalid
pub static INVALID_GATEWAY_CREDENTIAL: MessageType = MessageType {
    code: "IST0161",
    name: "InvalidGatewayCredential",
    level: Level::Error,
    template: "The credential referenced by the Gateway %s in namespace %s is invalid, which can cause the traffic not to work as expected.",
    description: "The credential provided for the Gateway resource is invalid",
};
/// IST0162 GatewayPortNotDefinedOnService (Warning): Gateway port not exposed by service
pub static GATEWAY_PORT_NOT_DEFINED_ON_SERVICE: MessageType = MessageType {
    code: "IST0162",
    name: "GatewayPortNotDefinedOnService",
    level: Level::Warning,
    template: "The gateway is listening on a target port (port %d) that is not defined in the Service associated with its workload instances (Pod selector %s). If you need to access the gateway port through the gateway Service, it will not be available.",
    description: "Gateway port not exposed by service",
};
/// IST0163 InvalidExternalControlPlaneConfig (Warning): Address for the ingress gateway on the external control plane is not valid
pub static INVALID_EXTERNAL_CONTROL_PLANE_CONFIG: MessageType = MessageType {
    code: "IST0163",
    name: "InvalidExternalControlPlaneConfig",
    level: Level::Warning,
    template: "The hostname (%s) that was provided for the webhook (%s) to reach the ingress gateway on the external control plane cluster %s. Traffic may not flow properly.",
    description: "Address for the ingress gateway on the external control plane is not valid",
};
/// IST0164 ExternalControlPlaneAddressIsNotAHostname (Info): Address for the ingress gateway on the external control plane is an IP address and not a hostname
pub static EXTERNAL_CONTROL_PLANE_ADDRESS_IS_NOT_A_HOSTNAME: MessageType = MessageType {
    code: "IST0164",
    name: "ExternalControlPlaneAddressIsNotAHostname",
    level: Level::Info,
    template: "The address (%s) that was provided for the webhook (%s) to reach the ingress gateway on the external control plane cluster is an IP address. This is not recommended for a production environment.",
    description: "Address for the ingress gateway on the external control plane is an IP address and not a hostname",
};
/// IST0165 ReferencedInternalGateway (Warning): VirtualServices should not reference internal Gateways.
pub static REFERENCED_INTERNAL_GATEWAY: MessageType = MessageType {
    code: "IST0165",
    name: "ReferencedInternalGateway",
    level: Level::Warning,
    template: "Gateway reference in VirtualService %s is to an implementation-generated internal Gateway: %s.",
    description: "VirtualServices should not reference internal Gateways.",
};
/// IST0166 IneffectiveSelector (Warning): Selector has no effect when applied to Kubernetes Gateways.
pub static INEFFECTIVE_SELECTOR: MessageType = MessageType {
    code: "IST0166",
    name: "IneffectiveSelector",
    level: Level::Warning,
    template: "Ineffective selector on Kubernetes Gateway %s. Use the TargetRef field instead.",
    description: "Selector has no effect when applied to Kubernetes Gateways.",
};
/// IST0167 IneffectivePolicy (Warning): The policy applied has no impact.
pub static INEFFECTIVE_POLICY: MessageType = MessageType {
    code: "IST0167",
    name: "IneffectivePolicy",
    level: Level::Warning,
    template: "The policy has no impact: %s.",
    description: "The policy applied has no impact.",
};
/// IST0168 UnknownUpgradeCompatibility (Warning): We cannot automatically detect whether a change is fully compatible or not
pub static UNKNOWN_UPGRADE_COMPATIBILITY: MessageType = MessageType {
    code: "IST0168",
    name: "UnknownUpgradeCompatibility",
    level: Level::Warning,
    template: "The configuration %q changed in release %s, but compatibility cannot be automatically detected: %s. Or, install with `--set compatibilityVersion=%s` to retain the old default.",
    description: "We cannot automatically detect whether a change is fully compatible or not",
};
/// IST0169 UpdateIncompatibility (Warning): The provided configuration object may be incompatible due to an upgrade
pub static UPDATE_INCOMPATIBILITY: MessageType = MessageType {
    code: "IST0169",
    name: "UpdateIncompatibility",
    level: Level::Warning,
    template: "The configuration %q changed in release %s: %s. Or, install with `--set compatibilityVersion=%s` to retain the old default.",
    description: "The provided configuration object may be incompatible due to an upgrade",
};
/// IST0170 MultiClusterInconsistentService (Warning): The services live in different clusters under multi-cluster deployment model are inconsistent
pub static MULTI_CLUSTER_INCONSISTENT_SERVICE: MessageType = MessageType {
    code: "IST0170",
    name: "MultiClusterInconsistentService",
    level: Level::Warning,
    template: "The service %v in namespace %q is inconsistent across clusters %q, which can lead to undefined behaviors. The inconsistent behaviors are: %v.",
    description: "The services live in different clusters under multi-cluster deployment model are inconsistent",
};
/// IST0171 NegativeConditionStatus (Warning): A condition with a negative status is present
pub static NEGATIVE_CONDITION_STATUS: MessageType = MessageType {
    code: "IST0171",
    name: "NegativeConditionStatus",
    level: Level::Warning,
    template: "A condition with a negative status is present: type=%s, reason=%s, message=%s.",
    description: "A condition with a negative status is present",
};
/// IST0172 FutureUnsupportedGatewayAPIVersion (Warning): The Gateway API CRD version will not be supported in the future
pub static FUTURE_UNSUPPORTED_GATEWAY_API_VERSION: MessageType = MessageType {
    code: "IST0172",
    name: "FutureUnsupportedGatewayAPIVersion",
    level: Level::Warning,
    template: "The Gateway API CRD version %v is lower than the minimum version: %v",
    description: "The Gateway API CRD version will not be supported in the future",
};
/// IST0173 DestinationRuleSubsetNotSelectPods (Error): Subsets defined in destination does not select any pods.
pub static DESTINATION_RULE_SUBSET_NOT_SELECT_PODS: MessageType = MessageType {
    code: "IST0173",
    name: "DestinationRuleSubsetNotSelectPods",
    level: Level::Error,
    template: "The Subset %s defined in the DestinationRule does not select any pods. Which may lead to 503 UH (NoHealthyUpstream).",
    description: "Subsets defined in destination does not select any pods.",
};
/// IST0174 UnknownDestinationRuleHost (Warning): Host defined in destination rule does not match any services in the mesh.
pub static UNKNOWN_DESTINATION_RULE_HOST: MessageType = MessageType {
    code: "IST0174",
    name: "UnknownDestinationRuleHost",
    level: Level::Warning,
    template: "The host %s defined in the DestinationRule does not match any services in the mesh.",
    description: "Host defined in destination rule does not match any services in the mesh.",
};
/// IST0175 JwksUriFetchUnrestricted (Warning): RequestAuthentication resources exist but BLOCKED_CIDRS_IN_JWKS_URIS is not configured on istiod.
pub static JWKS_URI_FETCH_UNRESTRICTED: MessageType = MessageType {
    code: "IST0175",
    name: "JwksUriFetchUnrestricted",
    level: Level::Warning,
    template: "BLOCKED_CIDRS_IN_JWKS_URIS is not configured but %d RequestAuthentication resource(s) exist (%s). Consider configuring it to restrict JWKS URI fetches to trusted networks.",
    description: "RequestAuthentication resources exist but BLOCKED_CIDRS_IN_JWKS_URIS is not configured on istiod.",
};
/// IST0176 GatewayAPICRDVersionBelowMinimum (Warning): A Gateway API CRD is installed at a version below the minimum required by this Istio version. Resources of this kind will not be processed.
pub static GATEWAY_API_CRD_VERSION_BELOW_MINIMUM: MessageType = MessageType {
    code: "IST0176",
    name: "GatewayAPICRDVersionBelowMinimum",
    level: Level::Warning,
    template: "Gateway API CRD %q is at version %q but Istio requires at least %q; resources of this kind will not be processed. Upgrade the Gateway API CRDs to satisfy the minimum version.",
    description: "A Gateway API CRD is installed at a version below the minimum required by this Istio version. Resources of this kind will not be processed.",
};
/// IST0177 ConflictingServiceEntryProtocol (Warning): Multiple ServiceEntries define the same host and port with conflicting protocols.
pub static CONFLICTING_SERVICE_ENTRY_PROTOCOL: MessageType = MessageType {
    code: "IST0177",
    name: "ConflictingServiceEntryProtocol",
    level: Level::Warning,
    template: "Multiple ServiceEntries (%s) define the same host %q and port %d with conflicting protocols (%s).",
    description: "Multiple ServiceEntries define the same host and port with conflicting protocols.",
};

/// Every message type, ordered by code.
pub static ALL: &[&MessageType] = &[
    &INTERNAL_ERROR,
    &DEPRECATED,
    &REFERENCED_RESOURCE_NOT_FOUND,
    &NAMESPACE_NOT_INJECTED,
    &POD_MISSING_PROXY,
    &SCHEMA_VALIDATION_ERROR,
    &MISPLACED_ANNOTATION,
    &UNKNOWN_ANNOTATION,
    &CONFLICTING_MESH_GATEWAY_VIRTUAL_SERVICE_HOSTS,
    &CONFLICTING_SIDECAR_WORKLOAD_SELECTORS,
    &MULTIPLE_SIDECARS_WITHOUT_WORKLOAD_SELECTORS,
    &VIRTUAL_SERVICE_DESTINATION_PORT_SELECTOR_REQUIRED,
    &DEPLOYMENT_ASSOCIATED_TO_MULTIPLE_SERVICES,
    &PORT_NAME_IS_NOT_UNDER_NAMING_CONVENTION,
    &NAMESPACE_MULTIPLE_INJECTION_LABELS,
    &INVALID_ANNOTATION,
    &UNKNOWN_MESH_NETWORKS_SERVICE_REGISTRY,
    &NO_MATCHING_WORKLOADS_FOUND,
    &NO_SERVER_CERTIFICATE_VERIFICATION_DESTINATION_LEVEL,
    &NO_SERVER_CERTIFICATE_VERIFICATION_PORT_LEVEL,
    &VIRTUAL_SERVICE_UNREACHABLE_RULE,
    &VIRTUAL_SERVICE_INEFFECTIVE_MATCH,
    &VIRTUAL_SERVICE_HOST_NOT_FOUND_IN_GATEWAY,
    &SCHEMA_WARNING,
    &SERVICE_ENTRY_ADDRESSES_REQUIRED,
    &DEPRECATED_ANNOTATION,
    &ALPHA_ANNOTATION,
    &DEPLOYMENT_CONFLICTING_PORTS,
    &GATEWAY_DUPLICATE_CERTIFICATE,
    &INVALID_WEBHOOK,
    &INGRESS_ROUTE_RULES_NOT_AFFECTED,
    &INSUFFICIENT_PERMISSIONS,
    &UNSUPPORTED_KUBERNETES_VERSION,
    &LOCALHOST_LISTENER,
    &INVALID_APPLICATION_UID,
    &CONFLICTING_GATEWAYS,
    &IMAGE_AUTO_WITHOUT_INJECTION_WARNING,
    &IMAGE_AUTO_WITHOUT_INJECTION_ERROR,
    &NAMESPACE_INJECTION_ENABLED_BY_DEFAULT,
    &JWT_CLAIM_BASED_ROUTING_WITHOUT_REQUEST_AUTHN,
    &EXTERNAL_NAME_SERVICE_TYPE_INVALID_PORT_NAME,
    &ENVOY_FILTER_USES_RELATIVE_OPERATION,
    &ENVOY_FILTER_USES_REPLACE_OPERATION_INCORRECTLY,
    &ENVOY_FILTER_USES_ADD_OPERATION_INCORRECTLY,
    &ENVOY_FILTER_USES_REMOVE_OPERATION_INCORRECTLY,
    &ENVOY_FILTER_USES_RELATIVE_OPERATION_WITH_PROXY_VERSION,
    &UNSUPPORTED_GATEWAY_API_VERSION,
    &INVALID_TELEMETRY_PROVIDER,
    &PODS_ISTIO_PROXY_IMAGE_MISMATCH_IN_NAMESPACE,
    &CONFLICTING_TELEMETRY_WORKLOAD_SELECTORS,
    &MULTIPLE_TELEMETRIES_WITHOUT_WORKLOAD_SELECTORS,
    &INVALID_GATEWAY_CREDENTIAL,
    &GATEWAY_PORT_NOT_DEFINED_ON_SERVICE,
    &INVALID_EXTERNAL_CONTROL_PLANE_CONFIG,
    &EXTERNAL_CONTROL_PLANE_ADDRESS_IS_NOT_A_HOSTNAME,
    &REFERENCED_INTERNAL_GATEWAY,
    &INEFFECTIVE_SELECTOR,
    &INEFFECTIVE_POLICY,
    &UNKNOWN_UPGRADE_COMPATIBILITY,
    &UPDATE_INCOMPATIBILITY,
    &MULTI_CLUSTER_INCONSISTENT_SERVICE,
    &NEGATIVE_CONDITION_STATUS,
    &FUTURE_UNSUPPORTED_GATEWAY_API_VERSION,
    &DESTINATION_RULE_SUBSET_NOT_SELECT_PODS,
    &UNKNOWN_DESTINATION_RULE_HOST,
    &JWKS_URI_FETCH_UNRESTRICTED,
    &GATEWAY_API_CRD_VERSION_BELOW_MINIMUM,
    &CONFLICTING_SERVICE_ENTRY_PROTOCOL,
];
