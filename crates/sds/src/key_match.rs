//! Does a private key belong to a certificate? The certificate's `subjectPublicKeyInfo` (read with
//! `x509-parser`) is compared with the public half of the private key:
//!
//! | key | public half |
//! |---|---|
//! | RSA, PKCS#1 (`RSA PRIVATE KEY`) or PKCS#8 | the modulus and public exponent the key holds (RFC 8017 `RSAPrivateKey`, read with `asn1-rs`) |
//! | EC P-256/P-384, PKCS#8 | `ring` checks the key's public point against its private scalar |
//! | EC, SEC1 (`EC PRIVATE KEY`) | the optional public point, checked against the private scalar by `ring` for P-256/P-384 |
//! | Ed25519, PKCS#8 v1 or v2 | derived from the seed by `ring` |
//!
//! istio-agent refuses a key pair that does not match (Go's `tls.LoadX509KeyPair`) and retries, so a
//! rotation that writes the certificate and the key one after the other is never sent half done;
//! Envoy would reject such a secret. Keys whose public half cannot be told (an EC key without the
//! optional public point, an inconsistent EC key, an algorithm not listed, DER that does not parse)
//! are not judged: Envoy reports them when it loads the secret.

use asn1_rs::{BitString, Error as Asn1Error, FromDer, Integer, Oid, OptTaggedExplicit, Sequence, oid};
use ring::{
    rand::SystemRandom,
    signature::{self, EcdsaKeyPair, EcdsaSigningAlgorithm, Ed25519KeyPair, KeyPair as _},
};
use rustls_pki_types::PrivateKeyDer;
use x509_parser::{public_key::PublicKey as SpkiKey, x509::SubjectPublicKeyInfo};

/// `Some(true)` / `Some(false)` when the key's public half was found and compared with the
/// certificate's (`cert_der`: one DER certificate); `None` when it cannot be told (see the module
/// documentation).
pub fn key_matches_certificate(cert_der: &[u8], key: &PrivateKeyDer<'_>) -> Option<bool> {
    let (_, cert) = x509_parser::parse_x509_certificate(cert_der).ok()?;
    let spki = cert.public_key();
    let key = public_half(key, spki)?;
    Some(match (spki.parsed().ok()?, key) {
        (SpkiKey::RSA(rsa), Public::Rsa { n, e }) => {
            unsigned(rsa.modulus) == unsigned(&n) && unsigned(rsa.exponent) == unsigned(&e)
        }
        (SpkiKey::RSA(_), Public::Raw(_)) | (_, Public::Rsa { .. }) => false,
        (_, Public::Raw(bytes)) => spki.subject_public_key.data.as_ref() == bytes.as_slice(),
    })
}

/// A private key's public half, in the form a certificate's `subjectPublicKeyInfo` carries it.
#[derive(Debug, PartialEq, Eq)]
enum Public {
    /// RSA modulus and public exponent (big-endian INTEGER contents).
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// Any other key as its public-key bytes (an EC point, an Ed25519 key).
    Raw(Vec<u8>),
}

/// `rsaEncryption` (RFC 8017).
const RSA_ENCRYPTION: Oid<'static> = oid!(1.2.840.113549.1.1.1);
/// `id-ecPublicKey` (RFC 5480).
const EC_PUBLIC_KEY: Oid<'static> = oid!(1.2.840.10045.2.1);
/// `secp256r1` / P-256 (RFC 5480).
const P256: Oid<'static> = oid!(1.2.840.10045.3.1.7);
/// `secp384r1` / P-384 (RFC 5480).
const P384: Oid<'static> = oid!(1.3.132.0.34);

fn public_half(key: &PrivateKeyDer<'_>, spki: &SubjectPublicKeyInfo<'_>) -> Option<Public> {
    // A SEC1 key may leave its curve out; the certificate's is the one it must be on to match.
    let cert_curve = spki.algorithm.parameters.as_ref().and_then(|p| p.as_oid().ok()).map(|o| o.to_owned());
    match key {
        PrivateKeyDer::Pkcs1(k) => rsa_public(k.secret_pkcs1_der()),
        PrivateKeyDer::Sec1(k) => sec1_public(k.secret_sec1_der(), cert_curve),
        PrivateKeyDer::Pkcs8(k) => pkcs8_public(k.secret_pkcs8_der(), cert_curve),
        _ => None,
    }
}

/// PKCS#8 `PrivateKeyInfo { version, algorithm, privateKey, … }` (RFC 5958).
fn pkcs8_public(der: &[u8], cert_curve: Option<Oid<'static>>) -> Option<Public> {
    if let Ok(pair) = Ed25519KeyPair::from_pkcs8_maybe_unchecked(der) {
        return Some(Public::Raw(pair.public_key().as_ref().to_vec()));
    }
    let rng = SystemRandom::new();
    for alg in [&signature::ECDSA_P256_SHA256_ASN1_SIGNING, &signature::ECDSA_P384_SHA384_ASN1_SIGNING] {
        if let Ok(pair) = EcdsaKeyPair::from_pkcs8(alg, der, &rng) {
            return Some(Public::Raw(pair.public_key().as_ref().to_vec()));
        }
    }
    let (_, (algorithm, curve, private)) = Sequence::from_der_and_then(der, |i| {
        let (i, _version) = Integer::from_der(i)?;
        let (i, (algorithm, curve)) = Sequence::from_der_and_then(i, |a| {
            let (a, algorithm) = Oid::from_der(a)?;
            let curve = Oid::from_der(a).ok().map(|(_, c)| c.to_owned());
            Ok((a, (algorithm.to_owned(), curve)))
        })?;
        let (i, private) = <&[u8]>::from_der(i)?;
        Ok::<_, asn1_rs::Err<Asn1Error>>((i, (algorithm, curve, private)))
    })
    .ok()?;
    if algorithm == RSA_ENCRYPTION {
        rsa_public(private)
    } else if algorithm == EC_PUBLIC_KEY {
        // Not a curve ring reads with its public point (e.g. P-521), or the point is missing.
        sec1_public(private, curve.or(cert_curve))
    } else {
        None
    }
}

/// PKCS#1 `RSAPrivateKey { version, modulus, publicExponent, … }` (RFC 8017 A.1.2).
fn rsa_public(der: &[u8]) -> Option<Public> {
    let (_, (n, e)) = Sequence::from_der_and_then(der, |i| {
        let (i, _version) = Integer::from_der(i)?;
        let (i, n) = Integer::from_der(i)?;
        let (i, e) = Integer::from_der(i)?;
        Ok::<_, asn1_rs::Err<Asn1Error>>((i, (n.as_ref().to_vec(), e.as_ref().to_vec())))
    })
    .ok()?;
    Some(Public::Rsa { n, e })
}

/// SEC1 `ECPrivateKey { version, privateKey, [0] parameters OPTIONAL, [1] publicKey OPTIONAL }`
/// (RFC 5915). The public point, checked against the private scalar when ring knows the curve.
fn sec1_public(der: &[u8], curve: Option<Oid<'static>>) -> Option<Public> {
    let (_, (private, parameters, point)) = Sequence::from_der_and_then(der, |i| {
        let (i, _version) = Integer::from_der(i)?;
        let (i, private) = <&[u8]>::from_der(i)?;
        let (i, parameters) = OptTaggedExplicit::<Oid<'_>, Asn1Error, 0>::from_der(i)?;
        let (i, point) = OptTaggedExplicit::<BitString<'_>, Asn1Error, 1>::from_der(i)?;
        let parameters = parameters.map(|p| p.into_inner().to_owned());
        let point = point.map(|p| p.into_inner().data.into_owned());
        Ok::<_, asn1_rs::Err<Asn1Error>>((i, (private, parameters, point)))
    })
    .ok()?;
    let point = point?;
    let alg: Option<&'static EcdsaSigningAlgorithm> = match parameters.or(curve) {
        Some(c) if c == P256 => Some(&signature::ECDSA_P256_SHA256_ASN1_SIGNING),
        Some(c) if c == P384 => Some(&signature::ECDSA_P384_SHA384_ASN1_SIGNING),
        _ => None,
    };
    if let Some(alg) = alg {
        EcdsaKeyPair::from_private_key_and_public_key(alg, private, &point, &SystemRandom::new()).ok()?;
    }
    Some(Public::Raw(point))
}

/// An INTEGER's contents without leading zero bytes (DER adds one when the high bit is set).
fn unsigned(int: &[u8]) -> &[u8] {
    let skip = int.iter().take_while(|b| **b == 0).count().min(int.len().saturating_sub(1));
    &int[skip..]
}

#[cfg(test)]
mod tests {
    use rustls_pki_types::{CertificateDer, pem::PemObject};

    use super::*;

    fn cert(pem: &str) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
    }

    fn key(pem: &str) -> PrivateKeyDer<'static> {
        PrivateKeyDer::from_pem_slice(pem.as_bytes()).unwrap()
    }

    fn label(key: &PrivateKeyDer<'_>) -> &'static str {
        crate::pem::key_label(key)
    }

    const RSA_CERT: &str = include_str!("../testdata/rsa-cert.pem");
    const RSA_KEY: &str = include_str!("../testdata/rsa-key.pem");
    const RSA_KEY_PKCS1: &str = include_str!("../testdata/rsa-key-pkcs1.pem");
    const EC_CERT: &str = include_str!("../testdata/ec-cert.pem");
    const EC_KEY_SEC1: &str = include_str!("../testdata/ec-key-sec1.pem");

    #[test]
    fn openssl_keys_match_their_certificates_only() {
        let rsa = cert(RSA_CERT);
        let ec = cert(EC_CERT);
        for key in [key(RSA_KEY), key(RSA_KEY_PKCS1)] {
            let label = label(&key);
            assert_eq!(key_matches_certificate(&rsa, &key), Some(true), "{label}");
            assert_eq!(key_matches_certificate(&ec, &key), Some(false), "{label}");
        }
        let key = key(EC_KEY_SEC1);
        assert_eq!(label(&key), "EC PRIVATE KEY");
        assert_eq!(key_matches_certificate(&ec, &key), Some(true));
        assert_eq!(key_matches_certificate(&rsa, &key), Some(false));
    }

    #[test]
    fn rcgen_pkcs8_ec_keys_match_their_certificates_only() {
        let pair = rcgen::KeyPair::generate().unwrap();
        let other = rcgen::KeyPair::generate().unwrap();
        let cert =
            rcgen::CertificateParams::new(vec!["a.example".to_string()]).unwrap().self_signed(&pair).unwrap();
        let der = key(&pair.serialize_pem());
        assert_eq!(label(&der), "PRIVATE KEY");
        assert_eq!(key_matches_certificate(cert.der(), &der), Some(true));
        assert_eq!(key_matches_certificate(cert.der(), &key(&other.serialize_pem())), Some(false));
    }

    #[test]
    fn rcgen_p384_and_ed25519_keys_match_their_certificates_only() {
        for alg in [&rcgen::PKCS_ECDSA_P384_SHA384, &rcgen::PKCS_ED25519] {
            let pair = rcgen::KeyPair::generate_for(alg).unwrap();
            let other = rcgen::KeyPair::generate_for(alg).unwrap();
            let cert = rcgen::CertificateParams::new(vec!["a.example".to_string()])
                .unwrap()
                .self_signed(&pair)
                .unwrap();
            assert_eq!(
                key_matches_certificate(cert.der(), &key(&pair.serialize_pem())),
                Some(true),
                "{alg:?}"
            );
            assert_eq!(
                key_matches_certificate(cert.der(), &key(&other.serialize_pem())),
                Some(false),
                "{alg:?}"
            );
        }
    }

    #[test]
    fn unreadable_der_is_not_judged() {
        let rsa = cert(RSA_CERT);
        let empty = PrivateKeyDer::Pkcs8(vec![0x30, 0x00].into());
        assert_eq!(key_matches_certificate(&rsa, &empty), None);
        assert_eq!(key_matches_certificate(&[0x30, 0x00], &empty), None);
        assert_eq!(key_matches_certificate(&[0x30, 0x00], &key(RSA_KEY)), None);
        let truncated = PrivateKeyDer::Pkcs1(key(RSA_KEY_PKCS1).secret_der()[..40].to_vec().into());
        assert_eq!(key_matches_certificate(&rsa, &truncated), None, "truncated");
        let long_length = PrivateKeyDer::Sec1(vec![0x30, 0x85, 0, 0, 0, 0, 1].into());
        assert_eq!(key_matches_certificate(&rsa, &long_length), None, "lengths over 4 bytes");
    }

    #[test]
    fn an_ec_key_without_its_public_point_is_not_judged() {
        // SEC1 with only version and private key (no [0] curve, no [1] public point).
        let sec1 = key(EC_KEY_SEC1);
        let (_, (version, private)) = Sequence::from_der_and_then(sec1.secret_der(), |i| {
            let (i, v) = Integer::from_der(i)?;
            let (i, p) = <&[u8]>::from_der(i)?;
            Ok::<_, asn1_rs::Err<Asn1Error>>((i, (v.as_ref().to_vec(), p.to_vec())))
        })
        .unwrap();
        let mut body = vec![0x02, version.len() as u8];
        body.extend(&version);
        body.extend([0x04, private.len() as u8]);
        body.extend(&private);
        let mut bare = vec![0x30, body.len() as u8];
        bare.extend(body);
        assert_eq!(key_matches_certificate(&cert(EC_CERT), &PrivateKeyDer::Sec1(bare.into())), None);
    }
}
