//! DNS proxying end to end: a real pilot-agent with `ISTIO_META_DNS_CAPTURE=true` against meshpilot's
//! secure port asks for NDS (`istio.networking.nds.v1.NameTable`) and answers DNS queries from it.
//! Files only, so the ServiceEntry VIPs are allocated in meshpilot's memory (docs/DNS.md). The agent's
//! DNS port is queried directly (no iptables): a ServiceEntry-only host resolves to its auto-allocated
//! VIP, a second ServiceEntry and then written `addresses` reach the agent while it runs.

use std::{
    net::{Ipv4Addr, SocketAddr},
    path::Path,
    time::Duration,
};

use meshpilot_testing::wait::{free_port, wait_for};
use tokio::net::UdpSocket;

use super::secure_port::{Meshpilot, Sidecar};

/// A DNS query for the A records of `name` (RFC 1035 §4.1: header, one question, class IN).
fn a_query(id: u16, name: &str) -> Vec<u8> {
    let mut q = Vec::new();
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]); // RD; QDCOUNT 1
    for label in name.trim_end_matches('.').split('.') {
        q.push(u8::try_from(label.len()).unwrap());
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]); // root, QTYPE A, QCLASS IN
    q
}

/// Skips a (possibly compressed) name at `at`; the offset after it.
fn skip_name(msg: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let len = *msg.get(at)?;
        if len == 0 {
            return Some(at + 1);
        }
        if len & 0xC0 == 0xC0 {
            return Some(at + 2);
        }
        at += 1 + usize::from(len);
    }
}

/// The A records of a response to the query `id` (`None`: not a response to it, or malformed).
fn a_records(msg: &[u8], id: u16) -> Option<Vec<Ipv4Addr>> {
    if msg.len() < 12 || msg[0..2] != id.to_be_bytes() {
        return None;
    }
    let answers = u16::from_be_bytes([msg[6], msg[7]]);
    let mut at = skip_name(msg, 12)? + 4;
    let mut out = Vec::new();
    for _ in 0..answers {
        at = skip_name(msg, at)?;
        let rtype = u16::from_be_bytes([*msg.get(at)?, *msg.get(at + 1)?]);
        let len = usize::from(u16::from_be_bytes([*msg.get(at + 8)?, *msg.get(at + 9)?]));
        let data = msg.get(at + 10..at + 10 + len)?;
        if rtype == 1 && len == 4 {
            out.push(Ipv4Addr::new(data[0], data[1], data[2], data[3]));
        }
        at += 10 + len;
    }
    Some(out)
}

/// One query to the agent's DNS port; the A records, or `None` on no (or no matching) answer in 1 s.
async fn resolve(dns: SocketAddr, name: &str) -> Option<Vec<Ipv4Addr>> {
    let socket = UdpSocket::bind("127.0.0.1:0").await.ok()?;
    let id = free_port();
    socket.send_to(&a_query(id, name), dns).await.ok()?;
    let mut buf = [0u8; 1500];
    let (n, _) = tokio::time::timeout(Duration::from_secs(1), socket.recv_from(&mut buf)).await.ok()?.ok()?;
    a_records(&buf[..n], id)
}

/// Waits until `name` resolves through the agent to addresses `accept` takes.
async fn wait_resolves(
    mp: &Meshpilot,
    dns: SocketAddr,
    name: &str,
    what: &str,
    accept: impl Fn(&[Ipv4Addr]) -> bool,
) -> Vec<Ipv4Addr> {
    let mut last = None;
    let found = wait_for(what, Duration::from_secs(60), async || {
        let got = resolve(dns, name).await;
        last = got.clone();
        got.filter(|a| accept(a))
    })
    .await;
    found.unwrap_or_else(|e| panic!("{e}: last answer {last:?}\n--- meshpilot ---\n{}", mp.log_text()))
}

fn service_entry(name: &str, host: &str, addresses: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: default}}\n\
         spec:\n  hosts: [{host}]\n{addresses}  ports: [{{number: 443, name: tls, protocol: TLS}}]\n  resolution: DNS\n"
    )
}

fn auto_vip(a: &[Ipv4Addr]) -> bool {
    a.len() == 1 && a[0].octets()[..2] == [240, 240]
}

fn write(dir: &Path, file: &str, text: &str) {
    let tmp = dir.join(format!(".{file}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(tmp, dir.join(file)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pilot_agent_resolves_service_entry_hosts_to_their_vips() {
    let work = tempfile::tempdir().unwrap();
    let config = tempfile::tempdir().unwrap();
    write(config.path(), "api.yaml", &service_entry("api", "api.external.test", ""));
    let mp = Meshpilot::start(config.path(), work.path(), None).await;
    let dns: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let dns_addr = dns.to_string();
    let env = [("ISTIO_META_DNS_CAPTURE", "true"), ("DNS_PROXY_ADDR", dns_addr.as_str())];
    let _sidecar = Sidecar::provisioned(&mp, work.path(), "dns", "127.0.0.41", &env);

    // The ServiceEntry-only host: its auto-allocated VIP from 240.240.0.0/16.
    let api = wait_resolves(&mp, dns, "api.external.test", "api.external.test → 240.240.x.y", auto_vip).await;

    // A second ServiceEntry reaches the running agent with a VIP of its own.
    write(config.path(), "db.yaml", &service_entry("db", "db.external.test", ""));
    let db = wait_resolves(&mp, dns, "db.external.test", "db.external.test → 240.240.x.y", auto_vip).await;
    assert_ne!(api, db, "distinct entries get distinct VIPs");

    // Written addresses replace the allocated one; the other entry keeps its VIP.
    let fixed = "  addresses: [10.10.0.1]\n";
    write(config.path(), "api.yaml", &service_entry("api", "api.external.test", fixed));
    let want = [Ipv4Addr::new(10, 10, 0, 1)];
    wait_resolves(&mp, dns, "api.external.test", "api.external.test → 10.10.0.1", |a| a == want).await;
    assert_eq!(resolve(dns, "db.external.test").await, Some(db));
}
