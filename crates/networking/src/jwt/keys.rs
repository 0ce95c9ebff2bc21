//! Whether Envoy can load a JSON Web Key Set as a provider's `local_jwks`.
//!
//! Envoy (jwt_verify_lib) reads the set when the listener is loaded and **rejects the whole
//! configuration** when no key of it can be used ("Provider 'origins-0' in jwt_authn config has invalid
//! local jwks: …", measured with Envoy 1.40 for invalid JSON, `{"keys": []}` and an EC key whose point
//! is not on its curve); a set with at least one usable key loads (the others are skipped). Istio
//! sends the rule's `jwks` and fetched sets unchecked, so one bad set NACKs the listener; meshpilot
//! checks here and replaces an unusable set by the fail-closed one, with a finding.
//!
//! A key is usable when (jwt_verify_lib's rules, with BoringSSL's limits measured on Envoy 1.40):
//! `kty` is `RSA` (`n` an odd modulus of 512 to 16384 bits, `e` 3 or 65537, base64url; `alg` absent
//! or `RS*`/`PS*`), `EC` (curve P-256, P-384 or P-521 from `crv`, else from `alg` `ES256`/`ES384`/`ES512`,
//! else P-256; `alg`, if given, matching the curve; `x`, `y` base64url coordinates of a point on the
//! curve), `oct` (`k` base64url, `alg` absent or `HS*`) or `OKP` (`crv` `Ed25519`, `x` 32 bytes, `alg`
//! absent or `EdDSA`).

use base64::{
    Engine,
    engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig},
};
use num_bigint::BigUint;
use serde_json::{Map, Value};

/// base64url with or without padding (absl's `WebSafeBase64Unescape`, which Envoy uses).
const B64URL: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Why Envoy would reject `text` as a local JWKS, if it would.
pub(super) fn envoy_jwks_error(text: &str) -> Option<String> {
    let value: Value = match serde_json::from_str(text) {
        Ok(v @ Value::Object(_)) => v,
        _ => return Some("the key set is not a JSON object".to_string()),
    };
    let keys = match value.get("keys") {
        Some(Value::Array(keys)) => keys,
        Some(_) => return Some("\"keys\" is not a list".to_string()),
        None => return Some("the key set has no \"keys\"".to_string()),
    };
    if keys.is_empty() {
        return Some("the key set has no keys".to_string());
    }
    let mut reasons = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        match key.as_object().map(key_error) {
            Some(None) => return None,
            Some(Some(reason)) => reasons.push(format!("key #{i}: {reason}")),
            None => reasons.push(format!("key #{i}: not an object")),
        }
    }
    Some(format!("no usable key ({})", reasons.join("; ")))
}

/// Why one key is unusable, if it is.
fn key_error(key: &Map<String, Value>) -> Option<String> {
    let text = |name: &str| key.get(name).and_then(Value::as_str);
    let alg = text("alg");
    let bytes = |name: &str| -> Result<Vec<u8>, String> {
        let value = text(name).ok_or_else(|| format!("missing \"{name}\""))?;
        match B64URL.decode(value) {
            Ok(b) if !b.is_empty() => Ok(b),
            _ => Err(format!("\"{name}\" is not base64url")),
        }
    };
    let result = match text("kty") {
        None => Err("missing \"kty\"".to_string()),
        Some("RSA") => {
            if alg.is_some_and(|a| !a.starts_with("RS") && !a.starts_with("PS")) {
                Err(format!("alg {alg:?} is not an RSA algorithm"))
            } else {
                bytes("n").and_then(|n| bytes("e").and_then(|e| rsa_key_error(&n, &e)))
            }
        }
        Some("EC") => ec_key_error(text("crv"), alg, bytes("x"), bytes("y")),
        Some("oct") => {
            if alg.is_some_and(|a| !a.starts_with("HS")) {
                Err(format!("alg {alg:?} is not an HMAC algorithm"))
            } else {
                bytes("k").map(drop)
            }
        }
        Some("OKP") => {
            if alg.is_some_and(|a| a != "EdDSA") {
                Err(format!("alg {alg:?} is not EdDSA"))
            } else if text("crv") != Some("Ed25519") {
                Err("crv is not Ed25519".to_string())
            } else {
                bytes("x").and_then(|x| if x.len() == 32 { Ok(()) } else { Err("x is not 32 bytes".into()) })
            }
        }
        Some(other) => Err(format!("kty {other:?} is not supported")),
    };
    result.err()
}

/// Envoy 1.40 (BoringSSL) loads an RSA public key with an odd modulus of 512 to 16384 bits and an
/// exponent of 3 or 65537 (measured: other exponents, even moduli and 511-bit moduli are refused).
fn rsa_key_error(n: &[u8], e: &[u8]) -> Result<(), String> {
    let (n, e) = (BigUint::from_bytes_be(n), BigUint::from_bytes_be(e));
    if !(512..=16384).contains(&n.bits()) || !n.bit(0) {
        return Err(format!("modulus of {} bits is not an odd number of 512 to 16384 bits", n.bits()));
    }
    if e != BigUint::from(3u32) && e != BigUint::from(65537u32) {
        return Err(format!("exponent {e} is neither 3 nor 65537"));
    }
    Ok(())
}

/// The curves Envoy reads EC keys on: name, algorithm, prime `p` and coefficient `b` of
/// `y² = x³ − 3x + b (mod p)` (SEC 2 / FIPS 186-4 parameters), hex.
const CURVES: [(&str, &str, &str, &str); 3] = [
    (
        "P-256",
        "ES256",
        "ffffffff00000001000000000000000000000000ffffffffffffffffffffffff",
        "5ac635d8aa3a93e7b3ebbd55769886bc651d06b0cc53b0f63bce3c3e27d2604b",
    ),
    (
        "P-384",
        "ES384",
        "fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffeffffffff0000000000000000ffffffff",
        "b3312fa7e23ee7e4988e056be3f82d19181d9c6efe8141120314088f5013875ac656398d8a2ed19d2a85c8edd3ec2aef",
    ),
    (
        "P-521",
        "ES512",
        "1ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
        "51953eb9618e1c9a1f929a21a0b68540eea2da725b99b315f3b8b489918ef109e156193951ec7e937b1652c0bd3bb1bf073573df883d2c34f1ef451fd46b503f00",
    ),
];

fn ec_key_error(
    crv: Option<&str>,
    alg: Option<&str>,
    x: Result<Vec<u8>, String>,
    y: Result<Vec<u8>, String>,
) -> Result<(), String> {
    if alg.is_some_and(|a| !a.starts_with("ES")) {
        return Err(format!("alg {alg:?} is not an ECDSA algorithm"));
    }
    let curve = match (crv, alg) {
        (Some(c), _) => {
            CURVES.iter().find(|k| k.0 == c).ok_or_else(|| format!("crv {c:?} is not supported"))?
        }
        (None, Some(a)) => {
            CURVES.iter().find(|k| k.1 == a).ok_or_else(|| format!("alg {a:?} is not supported"))?
        }
        (None, None) => &CURVES[0],
    };
    if let Some(a) = alg
        && a != curve.1
    {
        return Err(format!("alg {a:?} does not go with crv {:?}", curve.0));
    }
    let (x, y) = (BigUint::from_bytes_be(&x?), BigUint::from_bytes_be(&y?));
    let hex = |h: &str| BigUint::parse_bytes(h.as_bytes(), 16).expect("static curve parameter");
    let (p, b) = (hex(curve.2), hex(curve.3));
    if x >= p || y >= p || !on_curve(&x, &y, &p, &b) {
        return Err(format!("x, y is not a point of {}", curve.0));
    }
    Ok(())
}

/// `y² ≡ x³ − 3x + b (mod p)` for `x, y < p`.
fn on_curve(x: &BigUint, y: &BigUint, p: &BigUint, b: &BigUint) -> bool {
    let left = (y * y) % p;
    let three_x = (x * 3u32) % p;
    let right = ((x * x % p) * x + b + p - three_x) % p;
    left == right
}

#[cfg(test)]
mod tests {
    use ring::{
        rand::SystemRandom,
        signature::{
            ECDSA_P256_SHA256_FIXED_SIGNING, ECDSA_P384_SHA384_FIXED_SIGNING, EcdsaKeyPair, KeyPair,
        },
    };
    use serde_json::json;

    use super::*;

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    }

    fn hex(h: &str) -> Vec<u8> {
        (0..h.len()).step_by(2).map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap()).collect()
    }

    fn ec(crv: &str, x: &[u8], y: &[u8]) -> Value {
        json!({"kty": "EC", "crv": crv, "x": b64(x), "y": b64(y)})
    }

    fn set(keys: Vec<Value>) -> String {
        json!({ "keys": keys }).to_string()
    }

    /// A generated key's public point (ring), split into coordinates.
    fn ring_point(alg: &'static ring::signature::EcdsaSigningAlgorithm) -> (Vec<u8>, Vec<u8>) {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap();
        let point = pair.public_key().as_ref();
        let n = (point.len() - 1) / 2;
        (point[1..=n].to_vec(), point[n + 1..].to_vec())
    }

    #[test]
    fn generated_and_generator_points_are_on_their_curves() {
        let (x, y) = ring_point(&ECDSA_P256_SHA256_FIXED_SIGNING);
        assert_eq!(envoy_jwks_error(&set(vec![ec("P-256", &x, &y)])), None);
        let (x, y) = ring_point(&ECDSA_P384_SHA384_FIXED_SIGNING);
        assert_eq!(envoy_jwks_error(&set(vec![ec("P-384", &x, &y)])), None);
        // P-521's generator (SEC 2).
        let gx = hex(
            "00c6858e06b70404e9cd9e3ecb662395b4429c648139053fb521f828af606b4d3dbaa14b5e77efe75928fe1dc127a2ffa8de3348b3c1856a429bf97e7e31c2e5bd66",
        );
        let gy = hex(
            "011839296a789a3bc0045c8a5fb42c7d1bd998f54449579b446817afbd17273e662c97ee72995ef42640c550b9013fad0761353c7086a272c24088be94769fd16650",
        );
        assert_eq!(envoy_jwks_error(&set(vec![ec("P-521", &gx, &gy)])), None);
        // Curve from alg; neither: P-256.
        let (x, y) = ring_point(&ECDSA_P256_SHA256_FIXED_SIGNING);
        let by_alg = json!({"kty": "EC", "alg": "ES256", "x": b64(&x), "y": b64(&y)});
        let bare = json!({"kty": "EC", "x": b64(&x), "y": b64(&y)});
        assert_eq!(envoy_jwks_error(&set(vec![by_alg, bare])), None);
    }

    #[test]
    fn off_curve_and_mismatched_ec_keys_are_unusable() {
        let (x, mut y) = ring_point(&ECDSA_P256_SHA256_FIXED_SIGNING);
        let last = y.len() - 1;
        y[last] ^= 1;
        let off = envoy_jwks_error(&set(vec![ec("P-256", &x, &y)])).unwrap();
        assert!(off.contains("not a point of P-256"), "{off}");
        // What Envoy 1.40 refused in a measured run: coordinates of one byte.
        let tiny = r#"{"keys": [{"kty":"EC","crv":"P-256","x":"eA","y":"eQ"}]}"#;
        assert!(envoy_jwks_error(tiny).unwrap().contains("not a point"));
        let (x, y) = ring_point(&ECDSA_P256_SHA256_FIXED_SIGNING);
        let wrong_alg = json!({"kty": "EC", "crv": "P-256", "alg": "ES384", "x": b64(&x), "y": b64(&y)});
        assert!(envoy_jwks_error(&set(vec![wrong_alg])).unwrap().contains("does not go with"));
        let wrong_curve = ec("secp256k1", &x, &y);
        assert!(envoy_jwks_error(&set(vec![wrong_curve])).unwrap().contains("not supported"));
    }

    #[test]
    fn one_usable_key_is_enough() {
        let (x, y) = ring_point(&ECDSA_P256_SHA256_FIXED_SIGNING);
        let bad = json!({"kty": "EC", "crv": "P-256", "x": "eA", "y": "eQ"});
        assert_eq!(envoy_jwks_error(&set(vec![bad.clone(), ec("P-256", &x, &y)])), None);
        let reason = envoy_jwks_error(&set(vec![bad, json!({"kty": "XYZ"}), json!(3)])).unwrap();
        assert!(reason.starts_with("no usable key (key #0:"), "{reason}");
        assert!(
            reason.contains("key #1: kty \"XYZ\" is not supported")
                && reason.contains("key #2: not an object")
        );
    }

    #[test]
    fn other_key_types() {
        let public_only: Value = serde_json::from_str(crate::jwt::PUBLIC_ONLY_JWKS).unwrap();
        let rsa = public_only["keys"][0].clone();
        assert_eq!(envoy_jwks_error(&set(vec![rsa.clone()])), None);
        // Refused by Envoy 1.40 (measured): a 256-bit modulus, an even modulus, exponent 17.
        let short = json!({"kty": "RSA", "e": "AQAB", "n": "0xObjM0UvS_oaazjpEYlAbwctEJ4L8pH3OuTb7qth7g"});
        assert!(envoy_jwks_error(&set(vec![short])).unwrap().contains("256 bits"));
        let mut even_n = B64URL.decode(rsa["n"].as_str().unwrap()).unwrap();
        *even_n.last_mut().unwrap() &= 0xfe;
        let even = json!({"kty": "RSA", "e": "AQAB", "n": b64(&even_n)});
        assert!(envoy_jwks_error(&set(vec![even])).unwrap().contains("not an odd number"));
        let mut e17 = rsa.clone();
        e17["e"] = json!("EQ");
        assert!(envoy_jwks_error(&set(vec![e17])).unwrap().contains("exponent 17"));
        let mut e3 = rsa.clone();
        e3["e"] = json!("Aw");
        assert_eq!(envoy_jwks_error(&set(vec![e3])), None);
        let mut rs = rsa.clone();
        rs["alg"] = json!("ES256");
        assert!(envoy_jwks_error(&set(vec![rs])).unwrap().contains("not an RSA algorithm"));
        let mut no_n = rsa;
        no_n.as_object_mut().unwrap().remove("n");
        assert!(envoy_jwks_error(&set(vec![no_n])).unwrap().contains("missing \"n\""));
        assert_eq!(
            envoy_jwks_error(&set(vec![json!({"kty": "oct", "k": "c2VjcmV0", "alg": "HS256"})])),
            None
        );
        assert!(
            envoy_jwks_error(&set(vec![json!({"kty": "oct", "k": "***"})]))
                .unwrap()
                .contains("not base64url")
        );
        let ed = json!({"kty": "OKP", "crv": "Ed25519", "x": b64(&[7; 32])});
        assert_eq!(envoy_jwks_error(&set(vec![ed])), None);
        let short = json!({"kty": "OKP", "crv": "Ed25519", "x": b64(&[7; 31])});
        assert!(envoy_jwks_error(&set(vec![short])).unwrap().contains("32 bytes"));
        // Padding is accepted (absl's decoder).
        assert_eq!(envoy_jwks_error(&set(vec![json!({"kty": "oct", "k": "YQ=="})])), None);
    }

    #[test]
    fn sets_that_are_not_sets() {
        assert!(envoy_jwks_error("jwks-inline-data").unwrap().contains("not a JSON object"));
        assert!(envoy_jwks_error("[]").unwrap().contains("not a JSON object"));
        assert!(envoy_jwks_error(r#"{"keys": []}"#).unwrap().contains("no keys"));
        assert!(envoy_jwks_error(r#"{"keys": {}}"#).unwrap().contains("not a list"));
        assert!(envoy_jwks_error(r#"{"kty": "oct", "k": "YQ"}"#).unwrap().contains("no \"keys\""));
    }
}
