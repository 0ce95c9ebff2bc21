//! The checks a certificate file or a private key file passes before it is served: PEM sections read
//! with `rustls-pki-types` (text outside sections is ignored, as OpenSSL does), each certificate or
//! key section's contents a complete DER `SEQUENCE` (`asn1-rs`). The contents are not validated
//! further: Envoy does that when it loads the secret, and [`crate::key_match`] compares a key with its
//! certificate.
//!
//! Errors are sentences for `/debug/configstatusz` and the log.

use asn1_rs::{FromDer, Sequence};
use rustls_pki_types::{
    CertificateDer, PrivateKeyDer,
    pem::{self, PemObject, SectionKind},
};

/// Checks a certificate chain or CA bundle: PEM with at least one `CERTIFICATE` section; returns the
/// certificates in file order (the leaf first, for a chain).
///
/// # Errors
/// What is wrong: not text, a section without its END line (or ending with another label), invalid
/// base64, contents that are not DER, or no `CERTIFICATE` section.
pub fn check_certificates(bytes: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<CertificateDer<'static>> = sections(bytes)?
        .into_iter()
        .filter_map(|(kind, der)| (kind == SectionKind::Certificate).then(|| CertificateDer::from(der)))
        .collect();
    if certs.is_empty() {
        return Err("no PEM CERTIFICATE block".into());
    }
    Ok(certs)
}

/// Checks a private key file: PEM with an unencrypted `PRIVATE KEY` (PKCS#8), `RSA PRIVATE KEY`
/// (PKCS#1) or `EC PRIVATE KEY` (SEC1) section (what Envoy loads without a password); returns the
/// first such key.
///
/// # Errors
/// What is wrong, as for [`check_certificates`]; an encrypted key (`ENCRYPTED PRIVATE KEY`, or an
/// RFC 1421 `Proc-Type: 4,ENCRYPTED` header) is named as such.
pub fn check_private_key(bytes: &[u8]) -> Result<PrivateKeyDer<'static>, String> {
    let found = sections(bytes).map(|all| {
        all.into_iter().find_map(|(kind, der)| match kind {
            SectionKind::PrivateKey => Some(PrivateKeyDer::Pkcs8(der.into())),
            SectionKind::RsaPrivateKey => Some(PrivateKeyDer::Pkcs1(der.into())),
            SectionKind::EcPrivateKey => Some(PrivateKeyDer::Sec1(der.into())),
            _ => None,
        })
    });
    match found {
        Ok(Some(key)) => Ok(key),
        // Encrypted sections are either skipped (a label rustls-pki-types does not read) or fail
        // to decode (RFC 1421 headers inside the section): name the reason instead.
        _ if is_encrypted(bytes) => {
            Err("the private key is encrypted; Envoy cannot load it without a password".into())
        }
        Err(e) => Err(e),
        Ok(None) => Err("no PEM private key block (PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)".into()),
    }
}

/// The PEM label of a key's section (`PRIVATE KEY`, `RSA PRIVATE KEY`, `EC PRIVATE KEY`).
pub fn key_label(key: &PrivateKeyDer<'_>) -> &'static str {
    match key {
        PrivateKeyDer::Pkcs1(_) => "RSA PRIVATE KEY",
        PrivateKeyDer::Sec1(_) => "EC PRIVATE KEY",
        _ => "PRIVATE KEY",
    }
}

fn label(kind: SectionKind) -> &'static str {
    match kind {
        SectionKind::Certificate => "CERTIFICATE",
        SectionKind::PrivateKey => "PRIVATE KEY",
        SectionKind::RsaPrivateKey => "RSA PRIVATE KEY",
        SectionKind::EcPrivateKey => "EC PRIVATE KEY",
        _ => "PEM",
    }
}

/// Every section rustls-pki-types reads from `bytes`, in file order; certificate and key sections
/// checked to hold one DER `SEQUENCE`.
fn sections(bytes: &[u8]) -> Result<Vec<(SectionKind, Vec<u8>)>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not a PEM file (not text)".to_string())?;
    let mut out = Vec::new();
    for section in <(SectionKind, Vec<u8>)>::pem_slice_iter(bytes) {
        let (kind, der) = section.map_err(|e| describe(&e, text))?;
        let checked = matches!(
            kind,
            SectionKind::Certificate
                | SectionKind::PrivateKey
                | SectionKind::RsaPrivateKey
                | SectionKind::EcPrivateKey
        );
        if checked && !matches!(Sequence::from_der(&der), Ok((rest, _)) if rest.is_empty()) {
            return Err(format!("PEM block {}: the contents are not DER", label(kind)));
        }
        out.push((kind, der));
    }
    Ok(out)
}

/// A PEM error as a sentence. A missing END line is reported with the END line found instead, if
/// the section ends with another label.
fn describe(error: &pem::Error, text: &str) -> String {
    match error {
        pem::Error::MissingSectionEnd { end_marker } => {
            let label = String::from_utf8_lossy(end_marker);
            let begin = format!("-----BEGIN {label}-----");
            let after_begin = text.lines().map(str::trim).skip_while(|l| *l != begin).skip(1);
            let mut ends = after_begin.filter_map(|l| l.strip_prefix("-----END ")?.strip_suffix("-----"));
            match ends.find(|end| *end != label) {
                Some(end) => format!("PEM block BEGIN {label} ends with END {end}"),
                None => format!("PEM block {label} has no END line"),
            }
        }
        pem::Error::Base64Decode(e) => format!("PEM block: invalid base64 ({e})"),
        pem::Error::IllegalSectionStart { line } => {
            format!("malformed PEM BEGIN line {:?}", String::from_utf8_lossy(line))
        }
        other => format!("not a PEM file ({other})"),
    }
}

/// Whether the text holds an encrypted private key: an `ENCRYPTED PRIVATE KEY` section (PKCS#8) or
/// an RFC 1421 `Proc-Type: 4,ENCRYPTED` header (OpenSSL's legacy encrypted PEM).
fn is_encrypted(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    text.lines().map(str::trim).any(|l| {
        l == "-----BEGIN ENCRYPTED PRIVATE KEY-----"
            || l.split_once(':').is_some_and(|(k, v)| k.trim() == "Proc-Type" && v.contains("ENCRYPTED"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A syntactically valid PEM block (its DER is an empty SEQUENCE).
    fn pem(label: &str) -> String {
        format!("-----BEGIN {label}-----\nMAA=\n-----END {label}-----\n")
    }

    #[test]
    fn pem_checks() {
        assert_eq!(
            check_certificates(format!("junk\n{}{}", pem("CERTIFICATE"), pem("CERTIFICATE")).as_bytes())
                .map(|c| c.len()),
            Ok(2)
        );
        assert_eq!(check_certificates(pem("PRIVATE KEY").as_bytes()), Err("no PEM CERTIFICATE block".into()));
        assert_eq!(check_certificates(b"hello"), Err("no PEM CERTIFICATE block".into()));
        assert_eq!(check_certificates(&[0xff, 0xfe]), Err("not a PEM file (not text)".into()));
        let bad64 = "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n";
        assert!(check_certificates(bad64.as_bytes()).unwrap_err().contains("invalid base64"));
        let not_der = "-----BEGIN CERTIFICATE-----\naGVsbG8=\n-----END CERTIFICATE-----\n";
        assert!(check_certificates(not_der.as_bytes()).unwrap_err().contains("not DER"));
        let unterminated = "-----BEGIN CERTIFICATE-----\nMAA=\n";
        assert!(check_certificates(unterminated.as_bytes()).unwrap_err().contains("no END line"));
        let mismatched = "-----BEGIN CERTIFICATE-----\nMAA=\n-----END PRIVATE KEY-----\n";
        assert!(check_certificates(mismatched.as_bytes()).unwrap_err().contains("ends with END PRIVATE KEY"));

        for label in ["PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY"] {
            assert_eq!(check_private_key(pem(label).as_bytes()).map(|k| key_label(&k)), Ok(label));
        }
        assert!(
            check_private_key(pem("ENCRYPTED PRIVATE KEY").as_bytes()).unwrap_err().contains("encrypted")
        );
        let legacy = "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nMAA=\n-----END RSA PRIVATE KEY-----\n";
        assert!(check_private_key(legacy.as_bytes()).unwrap_err().contains("encrypted"));
        assert!(check_private_key(pem("CERTIFICATE").as_bytes()).unwrap_err().contains("no PEM private key"));
    }

    #[test]
    fn the_first_key_is_taken_and_an_unterminated_later_section_is_named() {
        let two = format!("{}{}", pem("EC PRIVATE KEY"), pem("PRIVATE KEY"));
        assert_eq!(check_private_key(two.as_bytes()).map(|k| key_label(&k)), Ok("EC PRIVATE KEY"));
        let later = format!("{}-----BEGIN PRIVATE KEY-----\nMAA=\n", pem("CERTIFICATE"));
        assert_eq!(check_private_key(later.as_bytes()), Err("PEM block PRIVATE KEY has no END line".into()));
    }
}
