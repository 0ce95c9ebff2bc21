//! Does a private key belong to a certificate? A small DER reader comparing the certificate's
//! `subjectPublicKeyInfo` with the public key a private key file carries (RSA modulus and exponent;
//! the EC public point, which PKCS#8 and SEC1 keys written by OpenSSL, ring and rcgen include).
//!
//! istio-agent refuses a key pair that does not match (Go's `tls.LoadX509KeyPair`) and retries, so a
//! rotation that writes the certificate and the key one after the other is never sent half done;
//! Envoy would reject such a secret. Keys whose public half cannot be found without cryptography
//! (Ed25519 in PKCS#8 v1, EC keys without the optional public key) are not judged.

/// `Some(true)` / `Some(false)` when the key's public half was found and compared with the
/// certificate's; `None` when it cannot be told (unknown key type, or DER this reader does not
/// understand).
pub fn key_matches_certificate(cert_der: &[u8], key_label: &str, key_der: &[u8]) -> Option<bool> {
    let spki = certificate_spki(cert_der)?;
    let key = match key_label {
        "RSA PRIVATE KEY" => rsa_private(key_der)?,
        "EC PRIVATE KEY" => ec_private(key_der)?,
        "PRIVATE KEY" => pkcs8(key_der)?,
        _ => return None,
    };
    Some(match (spki, key) {
        (PublicKey::Rsa { n, e }, PublicKey::Rsa { n: kn, e: ke }) => n == kn && e == ke,
        (PublicKey::Point(p), PublicKey::Point(kp)) => p == kp,
        _ => false,
    })
}

#[derive(Debug, PartialEq, Eq)]
enum PublicKey<'a> {
    /// RSA modulus and public exponent (INTEGER contents without leading zeros).
    Rsa { n: &'a [u8], e: &'a [u8] },
    /// Any other key as its public bytes (EC point, Ed25519 key).
    Point(&'a [u8]),
}

const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
const BIT_STRING: u8 = 0x03;
const OCTET_STRING: u8 = 0x04;
const OID: u8 = 0x06;
/// `rsaEncryption`, 1.2.840.113549.1.1.1.
const RSA_ENCRYPTION: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
/// `id-ecPublicKey`, 1.2.840.10045.2.1.
const EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];

/// Splits one DER TLV off `data`: (tag, contents, rest).
fn tlv(data: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = data.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        (rest[..n].iter().fold(0usize, |acc, b| (acc << 8) | usize::from(*b)), &rest[n..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// The contents of a TLV with tag `want` at the start of `data`, and the rest.
fn expect(data: &[u8], want: u8) -> Option<(&[u8], &[u8])> {
    let (tag, body, rest) = tlv(data)?;
    (tag == want).then_some((body, rest))
}

fn unsigned(int: &[u8]) -> &[u8] {
    let skip = int.iter().take_while(|b| **b == 0).count().min(int.len().saturating_sub(1));
    &int[skip..]
}

/// A BIT STRING's bytes (without the unused-bits count, which is 0 for keys).
fn bits(body: &[u8]) -> Option<&[u8]> {
    match body.split_first() {
        Some((0, rest)) => Some(rest),
        _ => None,
    }
}

/// `Certificate.tbsCertificate.subjectPublicKeyInfo` as a public key.
fn certificate_spki(der: &[u8]) -> Option<PublicKey<'_>> {
    let (cert, _) = expect(der, SEQUENCE)?;
    let (tbs, _) = expect(cert, SEQUENCE)?;
    let mut rest = tbs;
    if rest.first() == Some(&0xa0) {
        rest = tlv(rest)?.2; // [0] version
    }
    for _ in 0..5 {
        rest = tlv(rest)?.2; // serial, signature, issuer, validity, subject
    }
    let (spki, _) = expect(rest, SEQUENCE)?;
    let (alg, rest) = expect(spki, SEQUENCE)?;
    let (oid, _) = expect(alg, OID)?;
    let (key, _) = expect(rest, BIT_STRING)?;
    let key = bits(key)?;
    if oid == RSA_ENCRYPTION {
        let (seq, _) = expect(key, SEQUENCE)?;
        let (n, rest) = expect(seq, INTEGER)?;
        let (e, _) = expect(rest, INTEGER)?;
        return Some(PublicKey::Rsa { n: unsigned(n), e: unsigned(e) });
    }
    Some(PublicKey::Point(key))
}

/// PKCS#1 `RSAPrivateKey { version, n, e, … }`.
fn rsa_private(der: &[u8]) -> Option<PublicKey<'_>> {
    let (seq, _) = expect(der, SEQUENCE)?;
    let (_, rest) = expect(seq, INTEGER)?;
    let (n, rest) = expect(rest, INTEGER)?;
    let (e, _) = expect(rest, INTEGER)?;
    Some(PublicKey::Rsa { n: unsigned(n), e: unsigned(e) })
}

/// SEC1 `ECPrivateKey { version, privateKey, [0] parameters OPTIONAL, [1] publicKey OPTIONAL }`.
fn ec_private(der: &[u8]) -> Option<PublicKey<'_>> {
    let (seq, _) = expect(der, SEQUENCE)?;
    let (_, mut rest) = expect(seq, INTEGER)?;
    rest = expect(rest, OCTET_STRING)?.1;
    while let Some((tag, body, next)) = tlv(rest) {
        if tag == 0xa1 {
            let (key, _) = expect(body, BIT_STRING)?;
            return Some(PublicKey::Point(bits(key)?));
        }
        rest = next;
    }
    None
}

/// PKCS#8 `PrivateKeyInfo { version, algorithm, privateKey, [0] attributes OPTIONAL, [1] publicKey OPTIONAL }`.
fn pkcs8(der: &[u8]) -> Option<PublicKey<'_>> {
    let (seq, _) = expect(der, SEQUENCE)?;
    let (_, rest) = expect(seq, INTEGER)?;
    let (alg, rest) = expect(rest, SEQUENCE)?;
    let (oid, _) = expect(alg, OID)?;
    let (private, mut rest) = expect(rest, OCTET_STRING)?;
    if oid == RSA_ENCRYPTION {
        return rsa_private(private);
    }
    if oid == EC_PUBLIC_KEY {
        return ec_private(private);
    }
    while let Some((tag, body, next)) = tlv(rest) {
        if tag == 0x81 {
            // [1] IMPLICIT BIT STRING (PKCS#8 v2, e.g. Ed25519).
            return Some(PublicKey::Point(bits(body)?));
        }
        rest = next;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file_secrets::pem_blocks;

    fn first(pem: &str) -> (String, Vec<u8>) {
        let b = pem_blocks(pem.as_bytes()).unwrap().remove(0);
        (b.label, b.der)
    }

    const RSA_CERT: &str = include_str!("../testdata/rsa-cert.pem");
    const RSA_KEY: &str = include_str!("../testdata/rsa-key.pem");
    const RSA_KEY_PKCS1: &str = include_str!("../testdata/rsa-key-pkcs1.pem");
    const EC_CERT: &str = include_str!("../testdata/ec-cert.pem");
    const EC_KEY_SEC1: &str = include_str!("../testdata/ec-key-sec1.pem");

    #[test]
    fn openssl_keys_match_their_certificates_only() {
        let (_, rsa) = first(RSA_CERT);
        let (_, ec) = first(EC_CERT);
        for key in [RSA_KEY, RSA_KEY_PKCS1] {
            let (label, der) = first(key);
            assert_eq!(key_matches_certificate(&rsa, &label, &der), Some(true), "{label}");
            assert_eq!(key_matches_certificate(&ec, &label, &der), Some(false), "{label}");
        }
        let (label, der) = first(EC_KEY_SEC1);
        assert_eq!(key_matches_certificate(&ec, &label, &der), Some(true));
        assert_eq!(key_matches_certificate(&rsa, &label, &der), Some(false));
    }

    #[test]
    fn rcgen_pkcs8_ec_keys_match_their_certificates_only() {
        let key = rcgen::KeyPair::generate().unwrap();
        let other = rcgen::KeyPair::generate().unwrap();
        let cert =
            rcgen::CertificateParams::new(vec!["a.example".to_string()]).unwrap().self_signed(&key).unwrap();
        let (label, der) = first(&key.serialize_pem());
        assert_eq!(label, "PRIVATE KEY");
        assert_eq!(key_matches_certificate(cert.der(), &label, &der), Some(true));
        let (label, der) = first(&other.serialize_pem());
        assert_eq!(key_matches_certificate(cert.der(), &label, &der), Some(false));
    }

    #[test]
    fn unreadable_der_is_not_judged() {
        let (_, rsa) = first(RSA_CERT);
        assert_eq!(key_matches_certificate(&rsa, "PRIVATE KEY", &[0x30, 0x00]), None);
        assert_eq!(key_matches_certificate(&[0x30, 0x00], "PRIVATE KEY", &[0x30, 0x00]), None);
        assert_eq!(key_matches_certificate(&rsa, "DSA PRIVATE KEY", &[0x30, 0x00]), None);
        assert_eq!(tlv(&[0x30, 0x85, 0, 0, 0, 0, 1]), None, "lengths over 4 bytes");
        assert_eq!(tlv(&[0x30, 0x05, 1]), None, "truncated");
    }
}
