//! JSON Web Tokens for tests: an ES256 (ECDSA P-256, SHA-256) signing key generated at run time with
//! `ring`, its JSON Web Key Set, compact JWS tokens signed with it, and tampered tokens.
//!
//! ```no_run
//! use meshpilot_testing::jwt::{TestKey, claims, tamper};
//! let key = TestKey::generate();
//! let jwks = key.jwks_json(); // → RequestAuthentication `jwks`, or served at a `jwksUri`
//! let token = key.sign(&claims("https://issuer.example", "alice", 3600));
//! let bad = tamper(&token); // same signature over a changed payload: Envoy answers 401
//! ```

use std::time::{SystemTime, UNIX_EPOCH};

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD as B64};
use ring::{
    rand::{SecureRandom, SystemRandom},
    signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair},
};
use serde_json::{Value, json};

/// An ES256 signing key made for one test run; the private key never leaves the process.
pub struct TestKey {
    pair: EcdsaKeyPair,
    rng: SystemRandom,
    kid: String,
}

impl std::fmt::Debug for TestKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestKey").field("kid", &self.kid).finish_non_exhaustive()
    }
}

impl TestKey {
    /// A fresh key with a random key id (`kid`).
    ///
    /// # Panics
    /// If the system's random source fails.
    pub fn generate() -> Self {
        let rng = SystemRandom::new();
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).expect("generate P-256 key");
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .expect("read back the generated key");
        let mut id = [0u8; 8];
        rng.fill(&mut id).expect("random key id");
        TestKey { pair, rng, kid: B64.encode(id) }
    }

    /// The key id, set as `kid` in the JWK and in every token's header.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The public key in uncompressed SEC1 form (`0x04 ‖ x ‖ y`, 65 bytes), e.g. for
    /// `ring::signature::UnparsedPublicKey`.
    pub fn public_key(&self) -> &[u8] {
        self.pair.public_key().as_ref()
    }

    /// The public key as a JWK (RFC 7517/7518: `kty: EC`, `crv: P-256`, `x`, `y`, `alg: ES256`, `use:
    /// sig`, `kid`).
    pub fn jwk(&self) -> Value {
        let point = self.public_key();
        json!({
            "kty": "EC",
            "crv": "P-256",
            "x": B64.encode(&point[1..33]),
            "y": B64.encode(&point[33..65]),
            "alg": "ES256",
            "use": "sig",
            "kid": self.kid,
        })
    }

    /// The JSON Web Key Set holding this key: `{"keys": [JWK]}` as text.
    pub fn jwks_json(&self) -> String {
        json!({ "keys": [self.jwk()] }).to_string()
    }

    /// A compact JWS (`header.payload.signature`, base64url without padding) of `claims`, with
    /// header `{"alg":"ES256","typ":"JWT","kid":…}` and the 64-byte `r ‖ s` signature of RFC 7518
    /// §3.4.
    ///
    /// # Panics
    /// If signing fails (it does not with a valid key).
    pub fn sign(&self, claims: &Value) -> String {
        let header = json!({ "alg": "ES256", "typ": "JWT", "kid": self.kid });
        let input = format!("{}.{}", B64.encode(header.to_string()), B64.encode(claims.to_string()));
        let signature = self.pair.sign(&self.rng, input.as_bytes()).expect("sign");
        format!("{input}.{}", B64.encode(signature.as_ref()))
    }
}

/// Claims `iss`, `sub`, `iat` (now) and `exp` (now + `ttl_secs`), the minimum Envoy's `jwt_authn`
/// verifies; add `aud` or others with `claims(..)["aud"] = ...`.
///
/// # Panics
/// If the system clock is before 1970.
pub fn claims(issuer: &str, subject: &str, ttl_secs: u64) -> Value {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_secs();
    json!({ "iss": issuer, "sub": subject, "iat": now, "exp": now + ttl_secs })
}

/// `token` with its payload changed (`sub` gets `-tampered` appended, or is set when absent) and
/// its header and signature kept: well-formed, but its signature no longer verifies.
///
/// # Panics
/// If `token` is not a compact JWS with a JSON object payload.
pub fn tamper(token: &str) -> String {
    let mut parts = token.split('.');
    let (Some(header), Some(payload), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        panic!("not a compact JWS: {token:?}");
    };
    let mut claims: Value =
        serde_json::from_slice(&B64.decode(payload).expect("base64url payload")).expect("JSON payload");
    let sub = claims.get("sub").and_then(Value::as_str).unwrap_or("nobody").to_string();
    claims["sub"] = Value::String(format!("{sub}-tampered"));
    format!("{header}.{}.{signature}", B64.encode(claims.to_string()))
}

/// The decoded header and payload of a compact JWS (no verification), for assertions.
///
/// # Panics
/// If `token` is not a compact JWS with JSON header and payload.
pub fn decode_unverified(token: &str) -> (Value, Value) {
    let mut parts = token.split('.');
    let mut next_json = || -> Value {
        let part = parts.next().expect("JWS part");
        serde_json::from_slice(&B64.decode(part).expect("base64url")).expect("JSON")
    };
    let header = next_json();
    let payload = next_json();
    (header, payload)
}

#[cfg(test)]
mod tests {
    use ring::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};

    use super::*;

    /// Verifies `token` against the JWK as a verifier would: the public point rebuilt from `x`/`y`.
    fn verify_with_jwk(jwk: &Value, token: &str) -> bool {
        let coordinate = |name: &str| B64.decode(jwk[name].as_str().unwrap()).unwrap();
        let mut point = vec![4u8];
        point.extend(coordinate("x"));
        point.extend(coordinate("y"));
        let (input, signature) = token.rsplit_once('.').unwrap();
        let signature = B64.decode(signature).unwrap();
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &point).verify(input.as_bytes(), &signature).is_ok()
    }

    #[test]
    fn signed_token_verifies_against_the_jwks_and_tampered_does_not() {
        let key = TestKey::generate();
        let jwks: Value = serde_json::from_str(&key.jwks_json()).unwrap();
        let jwk = &jwks["keys"][0];
        assert_eq!(
            (jwk["kty"].as_str(), jwk["crv"].as_str(), jwk["alg"].as_str()),
            (Some("EC"), Some("P-256"), Some("ES256"))
        );
        let token = key.sign(&claims("https://issuer.test", "alice", 600));
        assert!(verify_with_jwk(jwk, &token));

        let bad = tamper(&token);
        assert_ne!(bad, token);
        assert!(!verify_with_jwk(jwk, &bad));
        let (header, payload) = decode_unverified(&bad);
        assert_eq!(header["kid"], key.kid());
        assert_eq!(payload["sub"], "alice-tampered");
        assert_eq!(payload["iss"], "https://issuer.test");
    }

    #[test]
    fn another_key_does_not_verify_and_header_names_the_key() {
        let (a, b) = (TestKey::generate(), TestKey::generate());
        assert_ne!(a.kid(), b.kid());
        let token = a.sign(&json!({"iss": "i", "sub": "s"}));
        assert!(!verify_with_jwk(&b.jwk(), &token));
        let (header, payload) = decode_unverified(&token);
        assert_eq!(header, json!({"alg": "ES256", "typ": "JWT", "kid": a.kid()}));
        assert_eq!(payload, json!({"iss": "i", "sub": "s"}));
        assert_eq!(a.public_key().len(), 65);
    }

    #[test]
    fn claims_expire_after_ttl() {
        let c = claims("i", "s", 60);
        assert_eq!(c["exp"].as_u64().unwrap() - c["iat"].as_u64().unwrap(), 60);
    }
}
