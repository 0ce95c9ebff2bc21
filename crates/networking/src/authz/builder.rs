//! The builder proper (Istio's `pilot/pkg/security/authz/builder/builder.go`): policies split by
//! action, rules translated into RBAC policy maps, maps into filters.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
};

use ::model::{Config, ConfigKey, Finding, Severity};
use api::{
    security::{AuthorizationPolicy, authorization_policy::authorization_policy::Action},
    spec::Spec,
};
use envoy_types::pb::envoy::{
    config::{
        listener::v3::{Filter, filter},
        rbac::v3::{Permission, Policy, Principal, Rbac, permission, principal, rbac},
    },
    extensions::filters::{
        http::rbac::v3::Rbac as HttpRbac,
        network::{
            http_connection_manager::v3::{HttpFilter, http_filter},
            rbac::v3::Rbac as TcpRbac,
        },
    },
};

use super::{
    AuthzContext, AuthzFilters, HTTP_EXT_AUTHZ_FILTER, HTTP_RBAC_FILTER, NETWORK_EXT_AUTHZ_FILTER,
    NETWORK_RBAC_FILTER,
    extauthz::{
        self, BAD_CUSTOM_ACTION_SUFFIX, BuiltExtAuthz, EXT_AUTHZ_MATCH_PREFIX, EXT_AUTHZ_SHADOW_STAT_PREFIX,
    },
    model::{GenError, Problem, RuleModel},
};
use crate::convert::any;

/// Annotation marking a policy as dry-run.
pub const DRY_RUN_ANNOTATION: &str = "istio.io/dry-run";
/// Shadow rules stat prefix of dry-run ALLOW policies.
pub const DRY_RUN_ALLOW_STAT_PREFIX: &str = "istio_dry_run_allow_";
/// Shadow rules stat prefix of dry-run DENY policies.
pub const DRY_RUN_DENY_STAT_PREFIX: &str = "istio_dry_run_deny_";
/// Stat prefix of network RBAC filters.
pub const TCP_STAT_PREFIX: &str = "tcp.";

/// The filter chain being built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chain {
    /// HTTP connection manager filters.
    Http,
    /// Network filters of a TCP chain.
    Tcp,
}

/// One filter to emit, independent of the chain type.
pub(crate) enum Out {
    Rbac { rules: Option<Rbac>, shadow: Option<Rbac>, shadow_prefix: String },
    ExtAuthz { built: Box<BuiltExtAuthz>, provider: String },
}

/// Rules built for one action (Istio's `builtRule`).
#[derive(Default)]
struct Built {
    rules: Option<Rbac>,
    shadow: Option<Rbac>,
    /// CUSTOM only: per provider, enforced and dry-run rules.
    provider_rules: BTreeMap<String, (Rbac, Rbac)>,
}

fn rbac(action: rbac::Action) -> Rbac {
    Rbac { action: action as i32, policies: HashMap::new(), ..Default::default() }
}

/// Istio's `rbacPolicyMatchNever`, for a policy without rules.
fn match_never() -> Policy {
    Policy {
        permissions: vec![Permission {
            rule: Some(permission::Rule::NotRule(Box::new(Permission {
                rule: Some(permission::Rule::Any(true)),
            }))),
        }],
        principals: vec![Principal {
            identifier: Some(principal::Identifier::NotId(Box::new(Principal {
                identifier: Some(principal::Identifier::Any(true)),
            }))),
        }],
        ..Default::default()
    }
}

/// The fail-closed replacement of an untranslatable rule: matches every request.
fn match_all() -> Policy {
    Policy {
        permissions: vec![Permission { rule: Some(permission::Rule::Any(true)) }],
        principals: vec![Principal { identifier: Some(principal::Identifier::Any(true)) }],
        ..Default::default()
    }
}

/// Istio's `policyName`.
fn policy_name(namespace: &str, name: &str, rule: usize, provider: Option<&str>) -> String {
    let prefix = match provider {
        None => String::new(),
        Some("") => format!("{EXT_AUTHZ_MATCH_PREFIX}-"),
        Some(p) => format!("{EXT_AUTHZ_MATCH_PREFIX}-{p}-"),
    };
    format!("{prefix}ns[{namespace}]-policy[{name}]-rule[{rule}]")
}

struct State<'a> {
    ctx: &'a AuthzContext<'a>,
    chain: Chain,
    bundle: Vec<String>,
    findings: Vec<Finding>,
    /// Fail-closed match-all policies to add to the DENY filter.
    deny_all: Vec<String>,
}

impl State<'_> {
    fn rbac_filter_name(&self) -> &'static str {
        match self.chain {
            Chain::Http => HTTP_RBAC_FILTER,
            Chain::Tcp => NETWORK_RBAC_FILTER,
        }
    }

    fn finding(&mut self, key: &ConfigKey, path: String, message: String) {
        self.findings.push(Finding {
            severity: Severity::Dropped,
            config: Some(key.clone()),
            path,
            resource: self.rbac_filter_name().to_string(),
            message,
        });
    }

    fn is_dry_run(&mut self, config: &Config) -> bool {
        let Some(v) = config.meta.annotations.get(DRY_RUN_ANNOTATION) else { return false };
        match validation::common::parse_go_bool(v) {
            Some(b) => b,
            None => {
                self.finding(
                    &config.key(),
                    format!("metadata.annotations[{DRY_RUN_ANNOTATION}]"),
                    format!("failed to parse the value {v:?} of {DRY_RUN_ANNOTATION}; the policy is enforced (as Istio)"),
                );
                false
            }
        }
    }

    /// Istio's `Builder.build` for one action's policies.
    fn build(
        &mut self,
        policies: &[(&Config, &AuthorizationPolicy)],
        action: rbac::Action,
        custom: bool,
    ) -> Option<Built> {
        if policies.is_empty() {
            return None;
        }
        let mut enforce = rbac(action);
        let mut shadow = rbac(action);
        let mut has_enforce = false;
        let mut has_dry_run = false;
        let mut provider_rules: BTreeMap<String, (Rbac, Rbac)> = BTreeMap::new();
        for (config, spec) in policies {
            let dry_run = self.is_dry_run(config);
            if custom && dry_run {
                // Istio puts dry-run CUSTOM rules into the marking RBAC filter's enforced `rules`
                // (action DENY), so its "dry run" denies the requests it matches, and ext_authz is
                // still called for them. A dry run must not change traffic: leave the policy out.
                self.finding(
                    &config.key(),
                    format!("metadata.annotations[{DRY_RUN_ANNOTATION}]"),
                    "dry-run is not supported for CUSTOM policies: the policy is not applied (Istio's output \
                     would deny the requests it matches)"
                        .to_string(),
                );
                continue;
            }
            let provider = custom.then(|| spec.provider.as_ref().map(|p| p.name.clone()).unwrap_or_default());
            let current: &mut Rbac = match &provider {
                Some(p) => {
                    let entry =
                        provider_rules.entry(p.clone()).or_insert_with(|| (rbac(action), rbac(action)));
                    if dry_run {
                        has_dry_run = true;
                        &mut entry.1
                    } else {
                        has_enforce = true;
                        &mut entry.0
                    }
                }
                None if dry_run => {
                    has_dry_run = true;
                    &mut shadow
                }
                None => {
                    has_enforce = true;
                    &mut enforce
                }
            };
            let key = config.key();
            let (ns, name) = (config.meta.namespace.as_str(), config.meta.name.as_str());
            for (i, rule) in spec.rules.iter().enumerate() {
                let rule_name = policy_name(ns, name, i, provider.as_deref());
                let model = RuleModel::new(ns, i, rule).map(|mut m| {
                    m.migrate_trust_domain(&self.bundle);
                    m
                });
                let mut dropped = Vec::new();
                match model.and_then(|m| m.generate(self.chain == Chain::Tcp, &mut dropped)) {
                    Ok(policy) if action == rbac::Action::Allow && !dropped.is_empty() => {
                        for path in dropped {
                            self.finding(
                                &key,
                                path,
                                format!(
                                    "HTTP-only field on a TCP filter chain: ALLOW rule {rule_name} left out, as Istio \
                                     does (it can never match TCP traffic)"
                                ),
                            );
                        }
                        drop(policy);
                    }
                    Ok(policy) => {
                        for path in dropped {
                            self.finding(
                                &key,
                                path,
                                format!(
                                    "HTTP-only field ignored on a TCP filter chain in rule {rule_name}, as Istio does \
                                     (the rule matches more)"
                                ),
                            );
                        }
                        current.policies.insert(rule_name, policy);
                    }
                    Err(Problem { path, error }) => {
                        let reason = match error {
                            GenError::Invalid(r) => r,
                            GenError::HttpOnly => "HTTP-only field".into(),
                        };
                        if dry_run || action == rbac::Action::Log {
                            self.finding(
                                &key,
                                path,
                                format!("{reason}: rule {rule_name} skipped (as Istio)"),
                            );
                        } else {
                            self.finding(
                                &key,
                                path,
                                format!(
                                    "{reason}: rule {rule_name} cannot be translated; it denies every request on \
                                     this proxy (fail closed; Istio would skip the rule)"
                                ),
                            );
                            self.deny_all.push(rule_name);
                        }
                    }
                }
            }
            if spec.rules.is_empty() {
                current.policies.insert(policy_name(ns, name, 0, provider.as_deref()), match_never());
            }
        }
        Some(Built {
            rules: has_enforce.then_some(enforce),
            shadow: has_dry_run.then_some(shadow),
            provider_rules,
        })
    }

    /// Istio's `buildHTTP` / `buildTCP` for the CUSTOM builder: per provider, the marking RBAC filter and
    /// ext_authz, or deny rules when the provider is unusable.
    fn custom_filters(&mut self, built: Built, keys: &BTreeMap<String, Vec<ConfigKey>>) -> Vec<Out> {
        let mut out = Vec::new();
        let bad = |rules: &Rbac| {
            let mut deny = rbac(rbac::Action::Deny);
            for (k, v) in &rules.policies {
                deny.policies.insert(format!("{k}{BAD_CUSTOM_ACTION_SUFFIX}"), v.clone());
            }
            Out::Rbac { rules: Some(deny), shadow: None, shadow_prefix: String::new() }
        };
        if built.provider_rules.len() > 1 {
            let names: Vec<&String> = built.provider_rules.keys().collect();
            let message = format!(
                "multiple CUSTOM authorization providers per workload are not supported (Istio's \
                 PILOT_ENABLE_MULTIPLE_CUSTOM_AUTHZ_PROVIDERS is off), found {} providers: {names:?}; \
                 requests matching these policies are denied",
                names.len()
            );
            for (provider, (rules, _)) in &built.provider_rules {
                for key in keys.get(provider).into_iter().flatten() {
                    self.finding(key, "spec.provider.name".into(), message.clone());
                }
                out.push(bad(rules));
            }
            return out;
        }
        for (provider, (rules, shadow)) in built.provider_rules {
            match extauthz::resolve(self.ctx.providers, self.ctx.services, &provider) {
                Err(e) => {
                    for key in keys.get(&provider).into_iter().flatten() {
                        self.finding(
                            key,
                            "spec.provider.name".into(),
                            format!(
                                "failed to process CUSTOM action for provider {provider}, requests matching the \
                                 policy are denied (as Istio): {e}"
                            ),
                        );
                    }
                    out.push(bad(&rules));
                }
                Ok(b) if self.chain == Chain::Tcp && b.tcp.is_none() => {
                    for key in keys.get(&provider).into_iter().flatten() {
                        self.finding(
                            key,
                            "spec.provider.name".into(),
                            format!(
                                "CUSTOM action with HTTP provider {provider} ignored on a TCP filter chain (as Istio)"
                            ),
                        );
                    }
                }
                Ok(b) => {
                    let shadow = (!shadow.policies.is_empty()).then_some(shadow);
                    out.push(Out::Rbac {
                        rules: shadow,
                        shadow: Some(rules),
                        shadow_prefix: EXT_AUTHZ_SHADOW_STAT_PREFIX.into(),
                    });
                    out.push(Out::ExtAuthz { built: Box::new(b), provider });
                }
            }
        }
        out
    }
}

/// Istio's `shadowRuleStatPrefix` (an absent shadow rule set counts as ALLOW, like Go's nil getter).
fn shadow_prefix(shadow: &Option<Rbac>) -> String {
    match shadow.as_ref().map_or(rbac::Action::Allow as i32, |r| r.action) {
        a if a == rbac::Action::Allow as i32 => DRY_RUN_ALLOW_STAT_PREFIX.into(),
        a if a == rbac::Action::Deny as i32 => DRY_RUN_DENY_STAT_PREFIX.into(),
        _ => String::new(),
    }
}

fn plain(built: Built) -> Out {
    let shadow_prefix = shadow_prefix(&built.shadow);
    Out::Rbac { rules: built.rules, shadow: built.shadow, shadow_prefix }
}

/// Builds the filters of `chain` for `policies`.
pub(crate) fn build<F: FromOut>(
    policies: &[Arc<Config>],
    ctx: &AuthzContext<'_>,
    chain: Chain,
) -> AuthzFilters<F> {
    let mut by_action: [Vec<(&Config, &AuthorizationPolicy)>; 4] = Default::default();
    for config in policies {
        let Spec::AuthorizationPolicy(spec) = &config.spec else { continue };
        let slot = match Action::try_from(spec.action) {
            Ok(Action::Custom) => 0,
            Ok(Action::Audit) => 1,
            Ok(Action::Deny) => 2,
            _ => 3,
        };
        by_action[slot].push((config, spec));
    }
    let mut bundle = Vec::new();
    if !ctx.trust_domain.is_empty() {
        bundle.push(ctx.trust_domain.to_string());
    }
    bundle.extend(ctx.trust_domain_aliases.iter().cloned());
    let mut state = State { ctx, chain, bundle, findings: Vec::new(), deny_all: Vec::new() };

    let mut custom_keys: BTreeMap<String, Vec<ConfigKey>> = BTreeMap::new();
    for (config, spec) in &by_action[0] {
        let provider = spec.provider.as_ref().map(|p| p.name.clone()).unwrap_or_default();
        custom_keys.entry(provider).or_default().push(config.key());
    }
    let custom = state.build(&by_action[0], rbac::Action::Deny, true);
    let audit = state.build(&by_action[1], rbac::Action::Log, false);
    let mut deny = state.build(&by_action[2], rbac::Action::Deny, false);
    let allow = state.build(&by_action[3], rbac::Action::Allow, false);

    if !state.deny_all.is_empty() {
        let d = deny.get_or_insert_with(Built::default);
        let rules = d.rules.get_or_insert_with(|| rbac(rbac::Action::Deny));
        for name in std::mem::take(&mut state.deny_all) {
            rules.policies.insert(name, match_all());
        }
    }

    let mut outs = Vec::new();
    if let Some(c) = custom {
        outs.extend(state.custom_filters(c, &custom_keys));
    }
    outs.extend([audit, deny, allow].into_iter().flatten().map(plain));
    AuthzFilters { filters: outs.into_iter().map(F::from_out).collect(), findings: state.findings }
}

/// A filter type the builder emits.
pub(crate) trait FromOut {
    /// The filter for one builder output.
    fn from_out(out: Out) -> Self;
}

impl FromOut for HttpFilter {
    fn from_out(out: Out) -> Self {
        let (name, config) = match out {
            Out::Rbac { rules, shadow, shadow_prefix } => (
                HTTP_RBAC_FILTER,
                any(&HttpRbac {
                    rules,
                    shadow_rules: shadow,
                    shadow_rules_stat_prefix: shadow_prefix,
                    ..Default::default()
                }),
            ),
            Out::ExtAuthz { built, provider } => {
                let mut http = built.http;
                http.filter_enabled_metadata = Some(extauthz::filter_matcher(HTTP_RBAC_FILTER, &provider));
                (HTTP_EXT_AUTHZ_FILTER, any(&http))
            }
        };
        HttpFilter {
            name: name.into(),
            config_type: Some(http_filter::ConfigType::TypedConfig(config)),
            ..Default::default()
        }
    }
}

impl FromOut for Filter {
    fn from_out(out: Out) -> Self {
        let (name, config) = match out {
            Out::Rbac { rules, shadow, shadow_prefix } => (
                NETWORK_RBAC_FILTER,
                any(&TcpRbac {
                    rules,
                    shadow_rules: shadow,
                    shadow_rules_stat_prefix: shadow_prefix,
                    stat_prefix: TCP_STAT_PREFIX.into(),
                    ..Default::default()
                }),
            ),
            Out::ExtAuthz { built, provider } => {
                let mut tcp = built.tcp.unwrap_or_default();
                tcp.filter_enabled_metadata = Some(extauthz::filter_matcher(NETWORK_RBAC_FILTER, &provider));
                (NETWORK_EXT_AUTHZ_FILTER, any(&tcp))
            }
        };
        Filter { name: name.into(), config_type: Some(filter::ConfigType::TypedConfig(config)) }
    }
}
