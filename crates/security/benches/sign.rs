//! CSR signing on one core: [`IstioCa::sign_csr`] for the CSR a sidecar agent sends, with the CA's
//! self-signed root (ECDSA P-256, see `ca.rs`).
//!
//! - `sign_csr/rsa2048`: an RSA-2048 CSR (pilot-agent's default key);
//! - `sign_csr/ec-p256`: an EC P-256 CSR (pilot-agent with `ECC_SIGNATURE_ALGORITHM=ECDSA`).
//!
//! Each call parses the PEM CSR, verifies its self-signature, builds the leaf for one SPIFFE
//! identity and signs it with the CA key. The CSRs are made once at start with `openssl req` in a
//! temporary directory (also the self-signed CA's directory). Signings per second = 1 / time.
//!
//! Run: `cargo bench -p meshpilot-security --bench sign`.

#![allow(missing_docs)] // criterion_group! generates an undocumented pub fn

use std::{hint::black_box, path::Path, process::Command};

use criterion::{Criterion, criterion_group, criterion_main};
use meshpilot_security::{CaOptions, IstioCa};

/// `openssl req -new -newkey <key_args> -nodes -subj /O=cluster.local` → the CSR PEM.
fn openssl_csr(dir: &Path, name: &str, key_args: &[&str]) -> String {
    let csr = dir.join(format!("{name}.csr"));
    let status = Command::new("openssl")
        .args(["req", "-new", "-nodes", "-subj", "/O=cluster.local", "-keyout"])
        .arg(dir.join(format!("{name}.key")))
        .arg("-out")
        .arg(&csr)
        .args(key_args)
        .status()
        .expect("openssl must be installed to make the benchmark CSRs");
    assert!(status.success(), "openssl req failed for {name}");
    std::fs::read_to_string(csr).expect("CSR written")
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let ca = IstioCa::load_or_create(None, &dir.path().join("ca"), CaOptions::default()).expect("CA");
    let identity = vec!["spiffe://cluster.local/ns/default/sa/default".to_string()];
    let csrs = [
        ("rsa2048", openssl_csr(dir.path(), "rsa", &["-newkey", "rsa:2048"])),
        ("ec-p256", openssl_csr(dir.path(), "ec", &["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"])),
    ];
    let mut group = c.benchmark_group("sign_csr");
    for (name, csr) in &csrs {
        ca.sign_csr(csr, &identity, 0).expect("the CSR signs");
        group.bench_function(*name, |b| b.iter(|| black_box(ca.sign_csr(csr, &identity, 0))));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
