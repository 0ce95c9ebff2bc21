//! The CA: keys created once and kept, plugged-in keys, signing rules (identity from the caller, TTL,
//! chain), and the gRPC service over TLS with token and client-certificate callers.

use std::sync::Arc;

use meshpilot_security::{
    Authenticator, CaError, CaOptions, IstioCa, SpiffeId,
    authn::{BoxFuture, TokenReviewStatus, TokenReviewer},
    ca::{self, CaSource},
    client::{SecureTarget, channel},
    service::{CertificateService, IstioCertificateRequest, request_certificate},
    tls,
};
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair, SanType};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, pem::PemObject};
use tonic::Code;
use x509_parser::prelude::*;

/// A CSR for `key` asking for `san` (which the CA must ignore).
fn csr(key: &KeyPair, san: &str) -> String {
    let mut params = CertificateParams::default();
    params.subject_alt_names = vec![SanType::URI(san.try_into().unwrap())];
    params.serialize_request(key).unwrap().pem().unwrap()
}

fn der_chain(chain: &[String]) -> Vec<CertificateDer<'static>> {
    chain
        .iter()
        .flat_map(|p| CertificateDer::pem_slice_iter(p.as_bytes()).map(Result::unwrap).collect::<Vec<_>>())
        .collect()
}

fn validity_secs(pem: &str) -> i64 {
    let der = CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
    let (_, cert) = parse_x509_certificate(&der).unwrap();
    cert.validity().not_after.timestamp() - cert.validity().not_before.timestamp()
}

fn uri_sans(pem: &str) -> Vec<String> {
    let der = CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
    ca::certificate_identities(&der).iter().map(ToString::to_string).collect()
}

/// Checks that `chain[i]` is signed by `chain[i + 1]`, the last one by itself.
fn assert_chain_verifies(chain: &[CertificateDer<'_>]) {
    let parsed: Vec<_> = chain.iter().map(|d| parse_x509_certificate(d).unwrap().1).collect();
    for (i, cert) in parsed.iter().enumerate() {
        let issuer = parsed.get(i + 1).unwrap_or(cert);
        cert.verify_signature(Some(issuer.public_key())).unwrap_or_else(|e| panic!("certificate {i}: {e}"));
    }
}

const CALLER: &str = "spiffe://cluster.local/ns/ns1/sa/sa1";

#[test]
fn the_self_signed_root_is_created_once_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("ca");
    let first = IstioCa::load_or_create(None, &state, CaOptions::default()).unwrap();
    assert_eq!(first.source(), &CaSource::SelfSigned(state.clone()));
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(state.join("ca-key.pem")).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    let again = IstioCa::load_or_create(None, &state, CaOptions::default()).unwrap();
    assert_eq!(first.root_pem(), again.root_pem(), "a restart keeps the root");
    // A certificate signed before the restart chains to the root after it.
    let chain = first.sign_csr(&csr(&KeyPair::generate().unwrap(), CALLER), &[CALLER.into()], 0).unwrap();
    let mut ders = der_chain(&chain[..1]);
    ders.extend(again.roots().iter().cloned());
    assert_chain_verifies(&ders);
    let root = parse_x509_certificate(&again.roots()[0]).unwrap().1;
    assert!(root.is_ca());
    assert_eq!(root.subject().iter_organization().next().unwrap().as_str().unwrap(), "cluster.local");
}

#[test]
fn an_interrupted_ca_write_is_recovered_or_named() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("ca");
    let first = IstioCa::load_or_create(None, &state, CaOptions::default()).unwrap();
    let names: Vec<String> = std::fs::read_dir(&state)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".tmp")), "no temporary file is left: {names:?}");

    // Cut short before the key (the last file written): a new root is made at the next start.
    std::fs::remove_file(state.join("ca-key.pem")).unwrap();
    let second = IstioCa::load_or_create(None, &state, CaOptions::default()).unwrap();
    assert_ne!(first.root_pem(), second.root_pem());

    // A key without its certificate (an older version's cut-short write): named, not a panic.
    std::fs::remove_file(state.join("ca-cert.pem")).unwrap();
    let err = IstioCa::load_or_create(None, &state, CaOptions::default()).unwrap_err().to_string();
    assert!(err.contains("ca-cert.pem") && err.contains("half-written CA"), "{err}");
}

#[test]
fn signing_uses_the_callers_identity_and_istios_ttl_rules() {
    let dir = tempfile::tempdir().unwrap();
    let ca = IstioCa::load_or_create(None, dir.path(), CaOptions::default()).unwrap();
    let key = KeyPair::generate().unwrap();
    let request = csr(&key, "spiffe://cluster.local/ns/kube-system/sa/admin");
    let chain = ca.sign_csr(&request, &[CALLER.into()], 3600).unwrap();
    assert_eq!(chain.len(), 2, "leaf and root for a self-signed CA");
    assert_eq!(chain[1], ca.root_pem());
    assert_eq!(uri_sans(&chain[0]), [CALLER], "the CSR's SAN is ignored");
    assert_chain_verifies(&der_chain(&chain));
    let leaf_der = CertificateDer::from_pem_slice(chain[0].as_bytes()).unwrap();
    let (_, leaf) = parse_x509_certificate(&leaf_der).unwrap();
    assert_eq!(
        leaf.public_key().subject_public_key.data.as_ref(),
        key.public_key_raw(),
        "the CSR's key is certified"
    );
    assert!(!leaf.is_ca());
    assert!(leaf.subject_alternative_name().unwrap().unwrap().critical, "empty subject: SAN critical");
    let eku = leaf.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.server_auth && eku.client_auth);

    let grace = ca::CLOCK_SKEW_GRACE.as_secs() as i64;
    assert_eq!(validity_secs(&chain[0]), 3600 + grace);
    for non_positive in [0, -5] {
        let chain = ca.sign_csr(&request, &[CALLER.into()], non_positive).unwrap();
        assert_eq!(validity_secs(&chain[0]), 24 * 3600 + grace, "default TTL for {non_positive}");
    }
    let too_long = ca.sign_csr(&request, &[CALLER.into()], 91 * 24 * 3600).unwrap_err();
    assert!(matches!(too_long, CaError::Ttl { .. }));
    assert_eq!(too_long.grpc_code(), Code::InvalidArgument);

    let garbage = ca.sign_csr(
        "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n",
        &[CALLER.into()],
        0,
    );
    assert!(matches!(garbage, Err(CaError::Csr(_))), "{garbage:?}");
    assert!(matches!(ca.sign_csr("not pem", &[CALLER.into()], 0), Err(CaError::Csr(_))));
    // A CSR whose signature does not match its content.
    let mut der = rustls_pki_types::CertificateSigningRequestDer::from_pem_slice(request.as_bytes())
        .unwrap()
        .as_ref()
        .to_vec();
    let last = der.len() - 1;
    der[last] ^= 0x55;
    let tampered = ::pem::encode(&::pem::Pem::new("CERTIFICATE REQUEST", der));
    assert!(matches!(ca.sign_csr(&tampered, &[CALLER.into()], 0), Err(CaError::Csr(_))));
    assert!(matches!(ca.sign_csr(&request, &[], 0), Err(CaError::NoIdentity)));
}

/// An intermediate CA signed by an offline root, in Istio's plugged-in layout.
fn plugged_in_dir(dir: &std::path::Path) -> (String, String) {
    let root_key = KeyPair::generate().unwrap();
    let mut root_params = CertificateParams::default();
    root_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let root = root_params.self_signed(&root_key).unwrap();
    let inter_key = KeyPair::generate().unwrap();
    let mut inter_params = CertificateParams::default();
    inter_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    let root_issuer = rcgen::Issuer::new(root_params, &root_key);
    let inter = inter_params.signed_by(&inter_key, &root_issuer).unwrap();
    std::fs::write(dir.join("ca-cert.pem"), inter.pem()).unwrap();
    std::fs::write(dir.join("ca-key.pem"), inter_key.serialize_pem()).unwrap();
    std::fs::write(dir.join("cert-chain.pem"), format!("{}{}", inter.pem(), root.pem())).unwrap();
    std::fs::write(dir.join("root-cert.pem"), root.pem()).unwrap();
    (inter.pem(), root.pem())
}

#[test]
fn a_plugged_in_ca_signs_with_its_intermediate_and_returns_the_full_chain() {
    let plugged = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let (inter, root) = plugged_in_dir(plugged.path());
    let ca = IstioCa::load_or_create(Some(plugged.path()), state.path(), CaOptions::default()).unwrap();
    assert_eq!(ca.source(), &CaSource::PluggedIn(plugged.path().to_path_buf()));
    assert_eq!(ca.root_pem(), root);
    let chain = ca.sign_csr(&csr(&KeyPair::generate().unwrap(), CALLER), &[CALLER.into()], 0).unwrap();
    // leaf, then cert-chain.pem one certificate each (intermediate, root), then root-cert.pem.
    assert_eq!(chain.len(), 4);
    assert_eq!(chain[1].trim(), inter.trim());
    assert_eq!(chain[3], root);
    assert_chain_verifies(&der_chain(&chain[..3]));
    assert!(!state.path().join("ca-key.pem").exists(), "no self-signed root is made beside a plugged-in CA");
}

/// A self-signed CA made by the real `openssl` with its key in the traditional encoding istiod writes
/// into `istio-ca-secret` (`RSA PRIVATE KEY`, PKCS#1) or Go's `x509.MarshalECPrivateKey` writes (`EC
/// PRIVATE KEY`, SEC1), in the plugged-in layout.
fn openssl_ca(dir: &std::path::Path, algorithm: &[&str]) {
    let key = dir.join("ca-key.pem");
    let run = |args: &[&str]| {
        let out = std::process::Command::new("openssl").current_dir(dir).args(args).output().unwrap();
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let mut genpkey = vec!["genpkey"];
    genpkey.extend_from_slice(algorithm);
    genpkey.extend_from_slice(&["-out", "pkcs8.pem"]);
    run(&genpkey);
    // `openssl rsa` writes PKCS#8 unless told `-traditional`; `openssl ec` writes SEC1.
    if algorithm.contains(&"RSA") {
        run(&["rsa", "-in", "pkcs8.pem", "-traditional", "-out", key.to_str().unwrap()]);
    } else {
        run(&["ec", "-in", "pkcs8.pem", "-out", key.to_str().unwrap()]);
    }
    run(&[
        "req",
        "-x509",
        "-new",
        "-key",
        "ca-key.pem",
        "-subj",
        "/O=cluster.local",
        "-days",
        "3650",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        "-out",
        "ca-cert.pem",
    ]);
    std::fs::copy(dir.join("ca-cert.pem"), dir.join("root-cert.pem")).unwrap();
    std::fs::write(dir.join("cert-chain.pem"), "").unwrap();
}

#[test]
fn ca_keys_in_istiods_pkcs1_and_sec1_encodings_sign_certificates() {
    for (algorithm, header) in [
        (&["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"][..], "BEGIN RSA PRIVATE KEY"),
        (&["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"][..], "BEGIN EC PRIVATE KEY"),
    ] {
        let plugged = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        openssl_ca(plugged.path(), algorithm);
        let key_pem = std::fs::read_to_string(plugged.path().join("ca-key.pem")).unwrap();
        assert!(key_pem.contains(header), "{key_pem}");
        let ca = IstioCa::load_or_create(Some(plugged.path()), state.path(), CaOptions::default())
            .unwrap_or_else(|e| panic!("{header}: {e}"));
        let chain = ca.sign_csr(&csr(&KeyPair::generate().unwrap(), CALLER), &[CALLER.into()], 0).unwrap();
        assert_eq!(uri_sans(&chain[0]), [CALLER]);
        assert_chain_verifies(&der_chain(&chain));
    }
}

#[test]
fn unusable_ca_files_are_start_up_errors_naming_the_file() {
    let plugged = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    plugged_in_dir(plugged.path());
    std::fs::write(plugged.path().join("ca-key.pem"), KeyPair::generate().unwrap().serialize_pem()).unwrap();
    let err = IstioCa::load_or_create(Some(plugged.path()), state.path(), CaOptions::default()).unwrap_err();
    assert!(err.to_string().contains("ca-key.pem") && err.to_string().contains("does not belong"), "{err}");

    std::fs::write(
        plugged.path().join("ca-key.pem"),
        "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n",
    )
    .unwrap();
    let err = IstioCa::load_or_create(Some(plugged.path()), state.path(), CaOptions::default()).unwrap_err();
    assert!(err.to_string().contains("ca-key.pem") && err.to_string().contains("PKCS#8"), "{err}");

    plugged_in_dir(plugged.path());
    std::fs::remove_file(plugged.path().join("root-cert.pem")).unwrap();
    let err = IstioCa::load_or_create(Some(plugged.path()), state.path(), CaOptions::default()).unwrap_err();
    assert!(err.to_string().contains("root-cert.pem") && err.to_string().contains("cannot read"), "{err}");
}

/// Reviews tokens from a fixed table: token → service-account user.
#[derive(Debug)]
struct Table(Vec<(&'static str, &'static str)>);

impl TokenReviewer for Table {
    fn review<'a>(
        &'a self,
        token: &'a str,
        audiences: &'a [String],
    ) -> BoxFuture<'a, Result<TokenReviewStatus, String>> {
        let found = self.0.iter().find(|(t, _)| *t == token);
        let status = match found {
            Some((_, user)) => TokenReviewStatus {
                authenticated: true,
                username: (*user).into(),
                audiences: audiences.to_vec(),
                error: String::new(),
            },
            None => TokenReviewStatus { error: "invalid bearer token".into(), ..Default::default() },
        };
        Box::pin(async move { Ok(status) })
    }
}

async fn serve(ca: Arc<IstioCa>) -> (SecureTarget, tokio::sync::oneshot::Sender<()>) {
    let reviewer = Table(vec![("token-sa1", "system:serviceaccount:ns1:sa1"), ("token-user", "alice")]);
    let authn =
        Arc::new(Authenticator::new("cluster.local", vec!["istio-ca".into()], Some(Arc::new(reviewer))));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = tls::server_config(Arc::clone(&ca), vec!["istiod.istio-system.svc".into()]).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(CertificateService::new(Arc::clone(&ca), authn))
            .serve_with_incoming_shutdown(tls::incoming(listener, config, None), async {
                let _ = stopped.await;
            }),
    );
    let target =
        SecureTarget { addr, server_name: "istiod.istio-system.svc".into(), roots: ca.roots().to_vec() };
    (target, stop)
}

fn request(key: &KeyPair, ttl: i64) -> IstioCertificateRequest {
    IstioCertificateRequest {
        csr: csr(key, "spiffe://cluster.local/ns/other/sa/other"),
        validity_duration: ttl,
        metadata: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grpc_service_signs_for_authenticated_callers_only() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Arc::new(IstioCa::load_or_create(None, dir.path(), CaOptions::default()).unwrap());
    let (target, stop) = serve(Arc::clone(&ca)).await;
    let anonymous = channel(&target, None).await.unwrap();

    // A service-account token: signed for its own identity, not the CSR's.
    let key = KeyPair::generate().unwrap();
    let response =
        request_certificate(anonymous.clone(), request(&key, 600), Some("token-sa1")).await.unwrap();
    assert_eq!(response.cert_chain.len(), 2);
    assert_eq!(uri_sans(&response.cert_chain[0]), [CALLER]);
    assert_eq!(response.cert_chain[1], ca.root_pem());

    // Refusals, as istiod answers them.
    for (token, code) in [
        (Some("forged"), Code::Unauthenticated),
        (Some("token-user"), Code::Unauthenticated),
        (None, Code::Unauthenticated),
    ] {
        let err = request_certificate(anonymous.clone(), request(&key, 600), token).await.unwrap_err();
        assert_eq!(err.code(), code, "{token:?}: {err:?}");
        assert_eq!(err.message(), "request authenticate failure");
    }
    let err = request_certificate(anonymous.clone(), request(&key, 100 * 24 * 3600), Some("token-sa1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    let bad = IstioCertificateRequest { csr: "garbage".into(), validity_duration: 60, metadata: Vec::new() };
    let err = request_certificate(anonymous.clone(), bad, Some("token-sa1")).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");

    // Renewal with the issued certificate as the client certificate, no token.
    let chain = der_chain(&response.cert_chain[..1]);
    let identity = (chain, PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())));
    let with_cert = channel(&target, Some(identity)).await.unwrap();
    let renewed =
        request_certificate(with_cert, request(&KeyPair::generate().unwrap(), 600), None).await.unwrap();
    assert_eq!(uri_sans(&renewed.cert_chain[0]), [CALLER]);

    // A client certificate from another CA does not complete the handshake.
    let other_dir = tempfile::tempdir().unwrap();
    let other = IstioCa::load_or_create(None, other_dir.path(), CaOptions::default()).unwrap();
    let stranger_key = KeyPair::generate().unwrap();
    let stranger = other.sign_csr(&csr(&stranger_key, CALLER), &[CALLER.into()], 600).unwrap();
    let identity = (
        der_chain(&stranger[..1]),
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(stranger_key.serialize_der())),
    );
    let refused = match channel(&target, Some(identity)).await {
        Err(_) => true,
        Ok(ch) => request_certificate(ch, request(&KeyPair::generate().unwrap(), 600), None).await.is_err(),
    };
    assert!(refused, "a foreign client certificate must not be accepted");
    let _ = stop.send(());
}

#[test]
fn spiffe_ids_round_trip_through_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let ca = IstioCa::load_or_create(None, dir.path(), CaOptions::default()).unwrap();
    let id = SpiffeId::parse("spiffe://cluster.local/ns/a/sa/b").unwrap();
    let chain = ca.sign_csr(&csr(&KeyPair::generate().unwrap(), CALLER), &[id.to_string()], 0).unwrap();
    let der = CertificateDer::from_pem_slice(chain[0].as_bytes()).unwrap();
    assert_eq!(ca::certificate_identities(&der), [id]);
}
