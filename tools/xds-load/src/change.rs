//! Config changes with markers: at T0 the harness applies change `seq`, whose effect carries a byte
//! string (the *marker*) that appears in the responses of one xDS type once the control plane has
//! pushed it. A stream has converged on change `seq` when it received and ACKed a response of that
//! type containing the marker of `seq` (or of a later change, which supersedes it).
//!
//! Built-in changes write one file, `xds-load-marker.yaml`, into the control plane's config
//! directory (atomically: a temporary file renamed over it):
//!
//! | change | objects | marker | type | affected streams |
//! |---|---|---|---|---|
//! | `service-entry` | ServiceEntry `istio-system/xds-load-marker`, host `marker-<seq>.xds-load.example` | the host | CDS | all |
//! | `workload-entry` | ServiceEntry `istio-system/xds-load-endpoints` + WorkloadEntry at `10.255.<a>.<b>` | the IP | EDS | all |
//! | `virtual-service` | VirtualService `ns-0/xds-load-marker` for `svc-0` with prefix `/xds-load-marker-<seq>/` | the prefix | RDS | sidecars of `ns-0` with Sidecar scoping, else all |
//! | `template` | `--template FILE` with `{{SEQ}}` replaced | `--marker` with `{{SEQ}}` replaced | `--marker-type` | all, or `--affected-namespace` |
//! | `command` | whatever the `--command` helper writes (e.g. a Kubernetes API server: `scripts/bench/kube-scale.py restart`) | [`marker_ip`] | EDS | all |
//!
//! The `command` helper ([`CommandChanger`]) is started once and makes each change when told, so
//! that no process start sits between T0 and the change.
//!
//! Change 0 is written before streams connect, so measured changes (1, 2, …) are updates of existing
//! objects (for `workload-entry`: endpoint-only changes).

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::{
    layout::{Layout, ProxyIdentity, ProxyType},
    xds::XdsType,
};

/// File the built-in changes write.
pub const MARKER_FILE: &str = "xds-load-marker.yaml";

/// What a change makes appear, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Marker {
    /// Response type the marker appears in.
    pub xds_type: XdsType,
    /// Bytes searched in the resources of such responses.
    pub bytes: Vec<u8>,
}

/// Something that changes the control plane's config at T0.
pub trait Changer: Send {
    /// The marker change `seq` will carry, known before it is applied: the harness announces it to the
    /// streams first, so that a control plane answering faster than the harness is scheduled after
    /// `apply` cannot deliver a marker the streams do not yet look for.
    ///
    /// # Errors
    /// The change is not well defined (e.g. a template without its marker).
    fn marker(&self, seq: u64) -> anyhow::Result<Marker>;

    /// Applies change `seq` (0 = the initial state, before streams connect).
    ///
    /// # Errors
    /// The change cannot be applied (e.g. the config directory is not writable).
    fn apply(&mut self, seq: u64) -> anyhow::Result<()>;

    /// `true` if a stream with this identity is expected to see the change.
    fn affects(&self, proxy: &ProxyIdentity, kind: ProxyType) -> bool;
}

/// The built-in kinds of change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChangeKind {
    /// No change: measure connection and readiness only.
    None,
    /// A ServiceEntry host renamed each time (CDS).
    ServiceEntry,
    /// A WorkloadEntry address moved each time (EDS, endpoint-only).
    WorkloadEntry,
    /// A VirtualService route prefix changed each time (RDS).
    VirtualService,
    /// `--template FILE` with `{{SEQ}}` replaced.
    Template,
    /// The `--command` helper makes the change; its marker is [`marker_ip`] in EDS.
    Command,
}

/// The marker IP of change `seq`: `10.255.<(seq / 250) mod 250>.<1 + seq mod 250>`.
pub fn marker_ip(seq: u64) -> String {
    format!("10.255.{}.{}", (seq / 250) % 250, 1 + seq % 250)
}

/// The config text and marker of a built-in change.
pub fn builtin(kind: ChangeKind, layout: &Layout, seq: u64) -> Option<(String, Marker)> {
    let marker = |t: XdsType, s: String| Marker { xds_type: t, bytes: s.into_bytes() };
    Some(match kind {
        ChangeKind::None | ChangeKind::Template | ChangeKind::Command => return None,
        ChangeKind::ServiceEntry => {
            let host = format!("marker-{seq}.xds-load.example");
            (
                format!(
                    "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata:\n  name: xds-load-marker\n  \
                     namespace: istio-system\nspec:\n  hosts: [{host}]\n  location: MESH_INTERNAL\n  \
                     resolution: STATIC\n  ports:\n  - {{name: http, number: 80, protocol: HTTP}}\n  \
                     endpoints:\n  - address: 10.255.255.1\n"
                ),
                marker(XdsType::Cluster, host),
            )
        }
        ChangeKind::WorkloadEntry => {
            let ip = marker_ip(seq);
            (
                format!(
                    "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata:\n  name: xds-load-endpoints\n  \
                     namespace: istio-system\nspec:\n  hosts: [endpoints.xds-load.example]\n  location: MESH_INTERNAL\n  \
                     resolution: STATIC\n  ports:\n  - {{name: http, number: 80, protocol: HTTP}}\n  \
                     workloadSelector:\n    labels: {{app: xds-load-endpoints}}\n---\n\
                     apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata:\n  name: xds-load-endpoint\n  \
                     namespace: istio-system\nspec:\n  address: {ip}\n  labels: {{app: xds-load-endpoints}}\n"
                ),
                marker(XdsType::Endpoint, ip),
            )
        }
        ChangeKind::VirtualService => {
            let host = layout.service_host(0);
            let prefix = format!("/xds-load-marker-{seq}/");
            (
                format!(
                    "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: xds-load-marker\n  \
                     namespace: {ns}\nspec:\n  hosts: [{host}]\n  http:\n  - match: [{{uri: {{prefix: {prefix}}}}}]\n    \
                     route: [{{destination: {{host: {host}, port: {{number: 80}}}}}}]\n  \
                     - route: [{{destination: {{host: {host}, port: {{number: 80}}}}}}]\n",
                    ns = layout.service_namespace(0)
                ),
                marker(XdsType::Route, prefix),
            )
        }
    })
}

/// Writes `text` to `dir/name` atomically (temporary hidden file, then rename).
///
/// # Errors
/// The file cannot be written or renamed.
pub fn write_atomic(dir: &Path, name: &str, text: &str) -> anyhow::Result<()> {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, dir.join(name))
        .with_context(|| format!("cannot rename {} into place", tmp.display()))
}

/// A change that writes files into the control plane's `--config-dir`.
#[derive(Debug)]
pub struct FileChanger {
    /// Directory written.
    pub dir: PathBuf,
    /// Kind of change.
    pub kind: ChangeKind,
    /// The mesh layout (for `virtual-service`'s host and who is affected).
    pub layout: Layout,
    /// `template`: the file text with `{{SEQ}}` placeholders.
    pub template: Option<String>,
    /// `template`: the marker with `{{SEQ}}` placeholders and its type.
    pub template_marker: Option<(XdsType, String)>,
    /// `template`: only proxies of this namespace are expected to see the change.
    pub affected_namespace: Option<String>,
}

impl FileChanger {
    /// The file text and marker of change `seq`.
    fn change(&self, seq: u64) -> anyhow::Result<(String, Marker)> {
        Ok(match self.kind {
            ChangeKind::Template => {
                let template = self.template.as_deref().context("--change template needs --template FILE")?;
                let (t, m) = self.template_marker.as_ref().context("--change template needs --marker")?;
                let seq = seq.to_string();
                let marker = Marker { xds_type: *t, bytes: m.replace("{{SEQ}}", &seq).into_bytes() };
                (template.replace("{{SEQ}}", &seq), marker)
            }
            kind => builtin(kind, &self.layout, seq).context("--change none makes no change")?,
        })
    }
}

impl Changer for FileChanger {
    fn marker(&self, seq: u64) -> anyhow::Result<Marker> {
        Ok(self.change(seq)?.1)
    }

    fn apply(&mut self, seq: u64) -> anyhow::Result<()> {
        let (text, _) = self.change(seq)?;
        write_atomic(&self.dir, MARKER_FILE, &text)
    }

    fn affects(&self, proxy: &ProxyIdentity, kind: ProxyType) -> bool {
        match self.kind {
            ChangeKind::VirtualService => {
                kind == ProxyType::Sidecar
                    && (!self.layout.sidecar_scope || proxy.namespace == self.layout.service_namespace(0))
            }
            ChangeKind::Template => self.affected_namespace.as_ref().is_none_or(|ns| &proxy.namespace == ns),
            _ => true,
        }
    }
}

/// A change made by a helper process (`--change command --command CMD`): `sh -c CMD` is started once;
/// for change `seq` the harness writes the line `seq` to its stdin and waits for one line on its
/// stdout, `ok` once the change is in (anything else is the helper's error). The helper gives the
/// endpoint the change adds the address [`marker_ip`]`(seq)`: the marker, in EDS, for every stream.
/// The helper's stdin closes when the changer is dropped (it should exit then); its stderr is the
/// harness's.
#[derive(Debug)]
pub struct CommandChanger {
    command: String,
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl CommandChanger {
    /// Starts `sh -c command`.
    ///
    /// # Errors
    /// The shell cannot be started.
    pub fn start(command: &str) -> anyhow::Result<CommandChanger> {
        use std::process::{Command, Stdio};
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start --command {command:?}"))?;
        let stdin = child.stdin.take();
        let stdout = std::io::BufReader::new(child.stdout.take().context("the helper's stdout")?);
        Ok(CommandChanger { command: command.to_string(), child, stdin, stdout })
    }
}

impl Changer for CommandChanger {
    fn marker(&self, seq: u64) -> anyhow::Result<Marker> {
        Ok(Marker { xds_type: XdsType::Endpoint, bytes: marker_ip(seq).into_bytes() })
    }

    fn apply(&mut self, seq: u64) -> anyhow::Result<()> {
        use std::io::{BufRead as _, Write as _};
        let stdin = self.stdin.as_mut().context("the helper's stdin is closed")?;
        writeln!(stdin, "{seq}")
            .and_then(|()| stdin.flush())
            .with_context(|| format!("--command {:?} stopped reading", self.command))?;
        let mut line = String::new();
        self.stdout.read_line(&mut line).with_context(|| format!("--command {:?}", self.command))?;
        match line.trim() {
            "ok" => Ok(()),
            "" => anyhow::bail!("--command {:?} exited before answering change {seq}", self.command),
            other => anyhow::bail!("--command {:?}, change {seq}: {other}", self.command),
        }
    }

    fn affects(&self, _: &ProxyIdentity, _: ProxyType) -> bool {
        true
    }
}

impl Drop for CommandChanger {
    fn drop(&mut self) {
        // End of input: the helper finishes its last change and exits.
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_markers_are_in_their_config() {
        let layout = Layout::default();
        for kind in [ChangeKind::ServiceEntry, ChangeKind::WorkloadEntry, ChangeKind::VirtualService] {
            let (a, m1) = builtin(kind, &layout, 1).unwrap();
            let (_, m2) = builtin(kind, &layout, 2).unwrap();
            assert!(a.contains(std::str::from_utf8(&m1.bytes).unwrap()), "{kind:?}");
            assert_ne!(m1, m2);
        }
        assert_eq!(marker_ip(0), "10.255.0.1");
        assert_eq!(marker_ip(251), "10.255.1.2");
        assert!(builtin(ChangeKind::None, &layout, 1).is_none());
    }

    #[test]
    fn a_command_helper_answers_each_change() {
        // A helper that acknowledges changes 0 and 1, then reports an error.
        let mut c =
            CommandChanger::start("read a; echo ok; read b; echo ok; read c; echo \"no pod for change $c\"")
                .unwrap();
        assert_eq!(
            c.marker(3).unwrap(),
            Marker { xds_type: XdsType::Endpoint, bytes: b"10.255.0.4".to_vec() }
        );
        c.apply(0).unwrap();
        c.apply(1).unwrap();
        let e = c.apply(2).unwrap_err().to_string();
        assert!(e.contains("change 2: no pod for change 2"), "{e}");
        // The helper has exited: no answer.
        assert!(c.apply(3).is_err());
    }

    #[test]
    fn virtual_service_change_reaches_its_namespace_when_scoped() {
        let layout = Layout { sidecar_scope: true, ..Layout::default() };
        let c = FileChanger {
            dir: PathBuf::new(),
            kind: ChangeKind::VirtualService,
            layout: layout.clone(),
            template: None,
            template_marker: None,
            affected_namespace: None,
        };
        assert!(c.affects(&layout.proxy(ProxyType::Sidecar, 0), ProxyType::Sidecar));
        assert!(!c.affects(&layout.proxy(ProxyType::Sidecar, 1), ProxyType::Sidecar));
    }
}
