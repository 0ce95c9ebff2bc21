//! Remote kubeconfigs as untrusted input: the kubeconfig of a remote Secret (one `data` value of a
//! Secret labelled `istio/multiCluster=true`) is read, validated and sanitised before any client is
//! built from it, as istiod's `kube.NewUntrustedRestConfig` does (`pkg/kube/util.go`:
//! `clientcmd.Load`, `clientcmd.Validate`, `sanitizeKubeConfig`; called from
//! `pkg/kube/multicluster/secretcontroller.go` for every cluster id of a Secret).
//!
//! Whoever can write a Secret in the system namespace should not thereby make the control plane run
//! a program, read its own files or send its credentials elsewhere. So a user entry (`users[]`) may not
//! use, unless `PILOT_INSECURE_MULTICLUSTER_KUBECONFIG_OPTIONS` names the option:
//!
//! | kubeconfig field | option that allows it |
//! |---|---|
//! | `exec` (a credential plugin: runs a program) | `exec` |
//! | `auth-provider` other than `oidc` (`gcp` runs `cmd-path`; `azure`, `openstack`, …) | the provider's name |
//! | `tokenFile` (reads a local file, sent as a bearer token) | `tokenFile` |
//! | `client-certificate` (a local file path) | `clientCertificate` |
//! | `client-key` (a local file path) | `clientKey` |
//!
//! As istiod: every user entry is checked, not only the one the current context uses; `oidc` is
//! always allowed (it reads no file and runs nothing); inline data (`token`,
//! `client-certificate-data`, `client-key-data`, `username`/`password`) and impersonation are
//! allowed; a cluster's `server`, `proxy-url` and `certificate-authority` (a local file, used only to
//! verify the server) are allowed. Fields istiod does not copy into the sanitised user are dropped
//! (`extensions`, `as-uid`, unknown fields).

use std::collections::BTreeSet;

use kube::config::{AuthInfo, Kubeconfig, NamedAuthInfo};
use secrecy::{ExposeSecret, SecretString};

/// The variable listing the insecure kubeconfig options allowed for remote clusters (istiod's
/// `features.InsecureKubeConfigOptions`, `pilot/pkg/features/pilot.go`): a comma-separated list of
/// `exec`, `tokenFile`, `clientCertificate`, `clientKey` and auth-provider names (`gcp`, `azure`,
/// `openstack`, …). Default: empty, nothing insecure allowed.
pub const INSECURE_KUBECONFIG_OPTIONS_ENV: &str = "PILOT_INSECURE_MULTICLUSTER_KUBECONFIG_OPTIONS";

/// The insecure kubeconfig options allowed in remote kubeconfigs (see the module docs and
/// [`INSECURE_KUBECONFIG_OPTIONS_ENV`]). The default allows none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InsecureKubeconfigOptions {
    allowed: BTreeSet<String>,
}

impl InsecureKubeconfigOptions {
    /// Parses a comma-separated list (`"exec,gcp"`). Names are case-sensitive, as istiod's
    /// (`clientKey`, not `clientkey`); spaces around a name and empty entries are ignored (istiod
    /// splits on commas only, so `"exec, gcp"` allows ` gcp` there, which matches nothing). Unknown
    /// names are kept: auth-provider names are open-ended.
    pub fn parse(list: &str) -> InsecureKubeconfigOptions {
        let allowed = list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
        InsecureKubeconfigOptions { allowed }
    }

    /// [`INSECURE_KUBECONFIG_OPTIONS_ENV`] through `lookup` (the binary's one snapshot of the
    /// environment); unset allows nothing.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> InsecureKubeconfigOptions {
        lookup(INSECURE_KUBECONFIG_OPTIONS_ENV).map(|v| Self::parse(&v)).unwrap_or_default()
    }

    /// `true` when `option` (`exec`, `tokenFile`, `clientCertificate`, `clientKey` or an auth-provider
    /// name) is allowed.
    pub fn allows(&self, option: &str) -> bool {
        self.allowed.contains(option)
    }

    /// The allowed options, sorted.
    pub fn allowed(&self) -> impl Iterator<Item = &str> {
        self.allowed.iter().map(String::as_str)
    }
}

/// Reads one remote kubeconfig (the bytes of one Secret `data` value, YAML or JSON) as untrusted
/// input: loads it, validates it as client-go's `clientcmd.Validate` does (the checks that need no
/// file), refuses the insecure options `allowed` does not list, and returns the sanitised kubeconfig
/// (see the module docs), ready for `kube::Config::from_custom_kubeconfig` with its current context.
///
/// # Errors
/// A sentence in istiod's words, prefixed as istiod prefixes it:
/// - `kubeconfig is empty`;
/// - `kubeconfig cannot be loaded: …` (not UTF-8, not YAML, wrong shape);
/// - `kubeconfig is not valid: …` (no current context, a context naming a missing user or cluster,
///   a cluster without server, a client certificate without key, two authentication methods, an
///   `exec` without command or apiVersion, …), naming the entry;
/// - `kubeconfig is not allowed: user "NAME": exec is not allowed (allowed when
///   PILOT_INSECURE_MULTICLUSTER_KUBECONFIG_OPTIONS includes exec)`, and likewise for `auth provider
///   gcp`, `tokenFile`, `clientCertificate`, `clientKey`.
pub fn remote_kubeconfig(bytes: &[u8], allowed: &InsecureKubeconfigOptions) -> Result<Kubeconfig, String> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err("kubeconfig is empty".to_string());
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|e| format!("kubeconfig cannot be loaded: not UTF-8 text ({e})"))?;
    let config = Kubeconfig::from_yaml(text)
        .map_err(|e| format!("kubeconfig cannot be loaded: {}", load_error(text, &e)))?;
    let invalid = validate(&config);
    if !invalid.is_empty() {
        return Err(format!("kubeconfig is not valid: invalid configuration: [{}]", invalid.join(", ")));
    }
    sanitize(config, allowed).map_err(|e| format!("kubeconfig is not allowed: {e}"))
}

/// Why `text` cannot be loaded as a kubeconfig (`error`: the loader's own), told without any of its
/// values: the YAML parser's message quotes the lines around the fault and serde's quote the value
/// found, and this message goes to the log and `/debug/clusterz` while the text is a Secret's. So: the
/// field path (`users[0].user.token`), the reason with every quoted span (`"…"`, `` `…` ``) left out,
/// and the line and column.
fn load_error(text: &str, error: &kube::config::KubeconfigError) -> String {
    let options = serde_saphyr::options! { with_snippet: false };
    let mut path = String::new();
    let result = serde_saphyr::with_deserializer_from_str_with_options(text, options, |de| {
        serde_path_to_error::deserialize::<_, Kubeconfig>(de).map_err(|e| {
            path = e.path().to_string();
            e.into_inner()
        })
    });
    match result {
        Err(e) if path.is_empty() || path == "." => without_quoted(&e.to_string()),
        Err(e) => format!("{path}: {}", without_quoted(&e.to_string())),
        // One document loads (kube's loader merges several): the loader's own reason, which quotes
        // nothing of the text for the errors left (kind or apiVersion mismatch between documents).
        Ok(_) => match error {
            kube::config::KubeconfigError::Parse(_) => "not a kubeconfig".to_string(),
            other => without_quoted(&other.to_string()),
        },
    }
}

/// `message` with every double-quoted or backticked span replaced by `…` (serde's `invalid type:
/// string "VALUE"`, `` integer `7` ``, `` unknown variant `X` ``).
fn without_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut chars = message.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' | '`' => {
                let mut escaped = false;
                for d in chars.by_ref() {
                    match d {
                        '\\' if !escaped => escaped = true,
                        d if d == c && !escaped => break,
                        _ => escaped = false,
                    }
                }
                out.push('…');
            }
            c => out.push(c),
        }
    }
    out
}

/// client-go's `clientcmd.Validate`, the checks that read no file, plus a current context (without
/// one client-go ends with "no configuration has been provided" when it builds the client). The
/// messages are client-go's.
fn validate(config: &Kubeconfig) -> Vec<String> {
    let mut errors = Vec::new();
    if config.clusters.is_empty() && config.auth_infos.is_empty() && config.contexts.is_empty() {
        errors.push("no configuration has been provided".to_string());
        return errors;
    }
    match config.current_context.as_deref().unwrap_or("") {
        "" => errors.push("current-context is not set (no context chosen)".to_string()),
        name if !config.contexts.iter().any(|c| c.name == name) => {
            errors.push(format!("context was not found for specified context: {name}"));
        }
        _ => {}
    }
    for named in &config.contexts {
        let name = &named.name;
        if name.is_empty() {
            errors.push("empty context name is not allowed".to_string());
        }
        let Some(context) = &named.context else {
            errors.push(format!("user was not specified for context {name:?}"));
            errors.push(format!("cluster was not specified for context {name:?}"));
            continue;
        };
        match context.user.as_deref().unwrap_or("") {
            "" => errors.push(format!("user was not specified for context {name:?}")),
            user if !config.auth_infos.iter().any(|u| u.name == user) => {
                errors.push(format!("user {user:?} was not found for context {name:?}"));
            }
            _ => {}
        }
        match context.cluster.as_str() {
            "" => errors.push(format!("cluster was not specified for context {name:?}")),
            cluster if !config.clusters.iter().any(|c| c.name == cluster) => {
                errors.push(format!("cluster {cluster:?} was not found for context {name:?}"));
            }
            _ => {}
        }
    }
    for named in &config.auth_infos {
        if let Some(user) = &named.auth_info {
            validate_user(&named.name, user, &mut errors);
        }
    }
    for named in &config.clusters {
        let name = &named.name;
        let Some(cluster) = &named.cluster else {
            errors.push("cluster has no server defined".to_string());
            continue;
        };
        if cluster.server.as_deref().unwrap_or("").is_empty() {
            errors.push(if name.is_empty() {
                "default cluster has no server defined".to_string()
            } else {
                format!("no server found for cluster {name:?}")
            });
        }
        if set(&cluster.certificate_authority) && set(&cluster.certificate_authority_data) {
            errors.push(format!(
                "certificate-authority-data and certificate-authority are both specified for {name}. \
                 certificate-authority-data will override."
            ));
        }
    }
    errors
}

fn set(field: &Option<String>) -> bool {
    field.as_deref().is_some_and(|s| !s.is_empty())
}

/// client-go's `validateAuthInfo`, without opening the certificate and key files.
fn validate_user(name: &str, user: &AuthInfo, errors: &mut Vec<String>) {
    let mut methods = Vec::new();
    if filled(&user.token) {
        methods.push("token");
    }
    if set(&user.username) || filled(&user.password) {
        methods.push("basicAuth");
    }
    if set(&user.client_certificate) || set(&user.client_certificate_data) {
        if set(&user.client_certificate) && set(&user.client_certificate_data) {
            errors.push(format!(
                "client-cert-data and client-cert are both specified for {name}. client-cert-data will override."
            ));
        }
        if set(&user.client_key) && filled(&user.client_key_data) {
            errors.push(format!(
                "client-key-data and client-key are both specified for {name}; client-key-data will override"
            ));
        }
        if !set(&user.client_key) && !filled(&user.client_key_data) {
            errors.push(format!(
                "client-key-data or client-key must be specified for {name} to use the clientCert \
                 authentication method."
            ));
        }
    }
    if let Some(exec) = &user.exec {
        if user.auth_provider.is_some() {
            errors.push(format!(
                "authProvider cannot be provided in combination with an exec plugin for {name}"
            ));
        }
        if exec.command.as_deref().unwrap_or("").is_empty() {
            errors.push(format!("command must be specified for {name} to use exec authentication plugin"));
        }
        if exec.api_version.as_deref().unwrap_or("").is_empty() {
            errors.push(format!("apiVersion must be specified for {name} to use exec authentication plugin"));
        }
    }
    if methods.len() > 1 {
        errors.push(format!(
            "more than one authentication method found for {name}; found [{}], only one is allowed",
            methods.join(" ")
        ));
    }
    let extras = set(&user.impersonate_uid)
        || user.impersonate_groups.as_ref().is_some_and(|g| !g.is_empty())
        || user.impersonate_user_extra.as_ref().is_some_and(|e| !e.is_empty());
    if extras && !set(&user.impersonate) {
        errors.push(format!("requesting uid, groups or user-extra for {name} without impersonating a user"));
    }
}

/// `true` when a secret field (`token`, `password`, `client-key-data`) is present and not empty.
fn filled(field: &Option<SecretString>) -> bool {
    field.as_ref().is_some_and(|s| !s.expose_secret().is_empty())
}

/// The refusal for `field`, naming the option that would allow it.
fn refused(user: &str, field: &str, option: &str) -> String {
    format!(
        "user {user:?}: {field} is not allowed (allowed when {INSECURE_KUBECONFIG_OPTIONS_ENV} includes {option})"
    )
}

/// istiod's `sanitizeKubeConfig`: refuses the insecure options `allowed` does not list and rebuilds
/// each user from the fields istiod keeps.
fn sanitize(mut config: Kubeconfig, allowed: &InsecureKubeconfigOptions) -> Result<Kubeconfig, String> {
    for NamedAuthInfo { name, auth_info, other } in &mut config.auth_infos {
        other.clear();
        let Some(user) = auth_info.take() else { continue };
        if let Some(provider) = &user.auth_provider
            && provider.name != "oidc"
            && !allowed.allows(&provider.name)
        {
            let field = format!("auth provider {}", provider.name);
            return Err(refused(name, &field, &provider.name));
        }
        // istiod's order of checks.
        for (present, field, option) in [
            (set(&user.client_key), "clientKey", "clientKey"),
            (set(&user.client_certificate), "clientCertificate", "clientCertificate"),
            (set(&user.token_file), "tokenFile", "tokenFile"),
            (user.exec.is_some(), "exec", "exec"),
        ] {
            if present && !allowed.allows(option) {
                return Err(refused(name, field, option));
            }
        }
        *auth_info = Some(AuthInfo {
            username: user.username,
            password: user.password,
            token: user.token,
            token_file: user.token_file,
            client_certificate: user.client_certificate,
            client_certificate_data: user.client_certificate_data,
            client_key: user.client_key,
            client_key_data: user.client_key_data,
            impersonate: user.impersonate,
            impersonate_groups: user.impersonate_groups,
            impersonate_user_extra: user.impersonate_user_extra,
            auth_provider: user.auth_provider,
            exec: user.exec,
            ..AuthInfo::default()
        });
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kubeconfig with one cluster, one context `remote` and the user `reader` given as YAML lines
    /// (indented under `user:`).
    fn with_user(user_lines: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: remote\nclusters:\n- name: remote\n  cluster:\n    \
             server: https://10.0.0.1:6443\n    certificate-authority-data: Q0E=\ncontexts:\n- name: remote\n  \
             context:\n    cluster: remote\n    user: reader\nusers:\n- name: reader\n  user:\n{user_lines}"
        )
    }

    fn none() -> InsecureKubeconfigOptions {
        InsecureKubeconfigOptions::default()
    }

    #[test]
    fn bearer_token_kubeconfig_is_accepted_as_is() {
        let text = with_user("    token: abc.def\n");
        let config = remote_kubeconfig(text.as_bytes(), &none()).unwrap();
        assert_eq!(config.current_context.as_deref(), Some("remote"));
        assert_eq!(
            config.clusters[0].cluster.as_ref().unwrap().server.as_deref(),
            Some("https://10.0.0.1:6443")
        );
        let user = config.auth_infos[0].auth_info.as_ref().unwrap();
        assert!(filled(&user.token));
        assert!(user.exec.is_none() && user.token_file.is_none());
    }

    #[test]
    fn exec_is_refused_unless_allowed() {
        let text = with_user(
            "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/steal\n      \
             interactiveMode: Never\n",
        );
        let err = remote_kubeconfig(text.as_bytes(), &none()).unwrap_err();
        assert_eq!(
            err,
            "kubeconfig is not allowed: user \"reader\": exec is not allowed (allowed when \
             PILOT_INSECURE_MULTICLUSTER_KUBECONFIG_OPTIONS includes exec)"
        );
        let config = remote_kubeconfig(text.as_bytes(), &InsecureKubeconfigOptions::parse("exec")).unwrap();
        let exec = config.auth_infos[0].auth_info.as_ref().unwrap().exec.as_ref().unwrap();
        assert_eq!(exec.command.as_deref(), Some("/bin/steal"));
    }

    #[test]
    fn auth_providers_other_than_oidc_are_refused_unless_named() {
        let gcp =
            with_user("    auth-provider:\n      name: gcp\n      config:\n        cmd-path: /bin/steal\n");
        let err = remote_kubeconfig(gcp.as_bytes(), &none()).unwrap_err();
        assert_eq!(
            err,
            "kubeconfig is not allowed: user \"reader\": auth provider gcp is not allowed (allowed when \
             PILOT_INSECURE_MULTICLUSTER_KUBECONFIG_OPTIONS includes gcp)"
        );
        // Another provider's name does not allow gcp.
        assert!(remote_kubeconfig(gcp.as_bytes(), &InsecureKubeconfigOptions::parse("azure,exec")).is_err());
        assert!(remote_kubeconfig(gcp.as_bytes(), &InsecureKubeconfigOptions::parse("azure, gcp")).is_ok());

        let oidc = with_user("    auth-provider:\n      name: oidc\n      config:\n        id-token: t\n");
        let config = remote_kubeconfig(oidc.as_bytes(), &none()).unwrap();
        let provider = config.auth_infos[0].auth_info.as_ref().unwrap().auth_provider.as_ref().unwrap();
        assert_eq!(provider.name, "oidc");
    }

    #[test]
    fn token_file_and_client_certificate_paths_are_refused_unless_allowed() {
        let cases = [
            ("    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n", "tokenFile"),
            ("    client-certificate: /etc/cert.pem\n    client-key-data: S0VZ\n", "clientCertificate"),
            ("    client-certificate-data: Q0VSVA==\n    client-key: /etc/key.pem\n", "clientKey"),
        ];
        for (lines, option) in cases {
            let text = with_user(lines);
            let err = remote_kubeconfig(text.as_bytes(), &none()).unwrap_err();
            assert_eq!(
                err,
                format!(
                    "kubeconfig is not allowed: user \"reader\": {option} is not allowed (allowed when \
                     PILOT_INSECURE_MULTICLUSTER_KUBECONFIG_OPTIONS includes {option})"
                ),
                "{option}"
            );
            assert!(
                remote_kubeconfig(text.as_bytes(), &InsecureKubeconfigOptions::parse(option)).is_ok(),
                "{option}"
            );
        }
        // Inline certificate and key data read no file.
        let inline = with_user("    client-certificate-data: Q0VSVA==\n    client-key-data: S0VZ\n");
        assert!(remote_kubeconfig(inline.as_bytes(), &none()).is_ok());
    }

    #[test]
    fn a_user_no_context_uses_is_checked_too() {
        let text = format!(
            "{}- name: unused\n  user:\n    exec:\n      apiVersion: v1\n      command: /bin/sh\n",
            with_user("    token: abc\n")
        );
        let err = remote_kubeconfig(text.as_bytes(), &none()).unwrap_err();
        assert!(err.contains("user \"unused\": exec is not allowed"), "{err}");
    }

    #[test]
    fn fields_istiod_does_not_keep_are_dropped() {
        let text = with_user(
            "    token: abc\n    as: admin\n    as-uid: \"42\"\n    extensions:\n    - name: x\n      \
             extension: {a: b}\n    surprise: field\n",
        );
        let config = remote_kubeconfig(text.as_bytes(), &none()).unwrap();
        let user = config.auth_infos[0].auth_info.as_ref().unwrap();
        assert_eq!(user.impersonate.as_deref(), Some("admin"));
        assert_eq!(user.impersonate_uid, None);
        assert!(user.extensions.is_none());
        assert!(user.other.is_empty());
    }

    #[test]
    fn a_kubeconfig_that_cannot_be_loaded_is_explained_without_its_values() {
        // The message goes to the log and /debug/clusterz: field path and reason, none of the Secret's
        // text (a YAML parser error would otherwise quote the lines around it).
        let wrong_type = with_user("    token: s3cr3t-t0ken\n")
            .replace("- name: reader\n  user:", "- name: reader\n  user: [s3cr3t-list]\n  x:");
        let err = remote_kubeconfig(wrong_type.as_bytes(), &none()).unwrap_err();
        assert!(err.starts_with("kubeconfig cannot be loaded: users[0].user: "), "{err}");
        assert!(!err.contains("s3cr3t") && !err.contains("reader") && !err.contains("10.0.0.1"), "{err}");
        let wrong_scalar = with_user("    token: {nested: s3cr3t}\n");
        let err = remote_kubeconfig(wrong_scalar.as_bytes(), &none()).unwrap_err();
        assert!(err.starts_with("kubeconfig cannot be loaded: users[0].user.token: "), "{err}");
        assert!(!err.contains("s3cr3t"), "{err}");
        let syntax = "apiVersion: v1\nusers:\n- name: reader\n  user: {token: \"s3cr3t\"\n";
        let err = remote_kubeconfig(syntax.as_bytes(), &none()).unwrap_err();
        assert!(err.starts_with("kubeconfig cannot be loaded: "), "{err}");
        assert!(!err.contains("s3cr3t") && err.contains("line"), "{err}");
    }

    #[test]
    fn invalid_kubeconfigs_are_explained() {
        assert_eq!(remote_kubeconfig(b"", &none()).unwrap_err(), "kubeconfig is empty");
        assert_eq!(remote_kubeconfig(b" \n", &none()).unwrap_err(), "kubeconfig is empty");
        let err = remote_kubeconfig(&[0xff, 0xfe, b'a'], &none()).unwrap_err();
        assert!(err.starts_with("kubeconfig cannot be loaded: not UTF-8"), "{err}");
        let err = remote_kubeconfig(b"clusters: 7", &none()).unwrap_err();
        assert!(err.starts_with("kubeconfig cannot be loaded: "), "{err}");

        let no_current = with_user("    token: abc\n").replace("current-context: remote\n", "");
        let err = remote_kubeconfig(no_current.as_bytes(), &none()).unwrap_err();
        assert!(err.contains("current-context is not set"), "{err}");

        let wrong_current =
            with_user("    token: abc\n").replace("current-context: remote", "current-context: other");
        let err = remote_kubeconfig(wrong_current.as_bytes(), &none()).unwrap_err();
        assert!(err.contains("context was not found for specified context: other"), "{err}");

        let missing_user = with_user("    token: abc\n").replace("user: reader", "user: nobody");
        let err = remote_kubeconfig(missing_user.as_bytes(), &none()).unwrap_err();
        assert!(err.contains("user \"nobody\" was not found for context \"remote\""), "{err}");

        let no_server = with_user("    token: abc\n").replace("server: https://10.0.0.1:6443\n    ", "");
        let err = remote_kubeconfig(no_server.as_bytes(), &none()).unwrap_err();
        assert!(err.contains("no server found for cluster \"remote\""), "{err}");

        let cert_no_key = with_user("    client-certificate-data: Q0VSVA==\n");
        let err = remote_kubeconfig(cert_no_key.as_bytes(), &none()).unwrap_err();
        assert!(err.contains("client-key-data or client-key must be specified for reader"), "{err}");

        let two_methods = with_user("    token: abc\n    username: u\n    password: p\n");
        let err = remote_kubeconfig(two_methods.as_bytes(), &none()).unwrap_err();
        assert!(
            err.contains("more than one authentication method found for reader; found [token basicAuth]"),
            "{err}"
        );

        let exec_no_command = with_user("    exec:\n      apiVersion: v1\n");
        let err = remote_kubeconfig(exec_no_command.as_bytes(), &InsecureKubeconfigOptions::parse("exec"))
            .unwrap_err();
        assert!(err.contains("command must be specified for reader"), "{err}");
    }

    #[test]
    fn options_parse_from_a_comma_list_or_the_environment() {
        let opts = InsecureKubeconfigOptions::parse(" exec,,tokenFile ,gcp");
        assert_eq!(opts.allowed().collect::<Vec<_>>(), ["exec", "gcp", "tokenFile"]);
        assert!(!opts.allows("tokenfile"));
        assert_eq!(InsecureKubeconfigOptions::parse(""), InsecureKubeconfigOptions::default());
        let from = InsecureKubeconfigOptions::from_lookup(|name| {
            (name == "PILOT_INSECURE_MULTICLUSTER_KUBECONFIG_OPTIONS").then(|| "clientKey".to_string())
        });
        assert!(from.allows("clientKey") && !from.allows("exec"));
        assert_eq!(InsecureKubeconfigOptions::from_lookup(|_| None), InsecureKubeconfigOptions::default());
    }
}
