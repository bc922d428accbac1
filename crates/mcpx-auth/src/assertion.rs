//! `private_key_jwt` client authentication (RFC 7523 §2.2, with OAuth 2.1's client
//! assertions): a short-lived JWT, signed ES256 (RFC 7518 §3.4) with the client's
//! PKCS#8 PEM key, whose `iss` and `sub` are the client id and whose `aud` is the
//! authorization server's issuer (RFC 7523 §3; SEP-1046 for MCP).

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use p256::ecdsa::signature::Signer;
use p256::ecdsa::{Signature, SigningKey};
use p256::pkcs8::DecodePrivateKey;

/// The `client_assertion_type` of a JWT assertion (RFC 7523 §2.2).
pub const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// How long an assertion is valid, in seconds.
const LIFETIME_SECS: u64 = 300;

/// A client assertion for `client_id` at the server `audience`, signed with the PKCS#8
/// PEM key `pem` (a P-256 key), issued at `now`.
///
/// Errors: the key is not a P-256 PKCS#8 PEM key (the message never quotes it), or
/// the OS's random source failed.
pub fn client_assertion(pem: &str, client_id: &str, audience: &str, now: SystemTime) -> Result<String, String> {
    let key = SigningKey::from_pkcs8_pem(pem.trim()).map_err(|_| {
        "`oauth.privateKey` is not a P-256 (ES256) private key in PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`)".to_owned()
    })?;
    let mut jti = [0u8; 16];
    mcpx_platform::random_bytes(&mut jti).map_err(|e| e.to_string())?;
    let iat = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let header = serde_json::json!({ "alg": "ES256", "typ": "JWT" });
    let claims = serde_json::json!({
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": iat,
        "exp": iat + LIFETIME_SECS,
        "jti": jti.iter().map(|b| format!("{b:02x}")).collect::<String>(),
    });
    let signing_input =
        format!("{}.{}", URL_SAFE_NO_PAD.encode(header.to_string()), URL_SAFE_NO_PAD.encode(claims.to_string()));
    let signature: Signature = key.sign(signing_input.as_bytes());
    Ok(format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature.to_bytes())))
}

#[cfg(test)]
mod tests {
    use p256::ecdsa::VerifyingKey;
    use p256::ecdsa::signature::Verifier;
    use p256::pkcs8::{EncodePrivateKey, LineEnding};

    use super::*;

    #[test]
    fn assertions_are_es256_jwts_with_the_clients_claims() {
        let key = SigningKey::from_slice(&[7u8; 32]).unwrap();
        let pem = key.to_pkcs8_pem(LineEnding::LF).unwrap();
        let now = UNIX_EPOCH + std::time::Duration::from_secs(1_000);
        let jwt = client_assertion(&pem, "client-1", "https://as.example.com", now).unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let decode =
            |p: &str| serde_json::from_slice::<serde_json::Value>(&URL_SAFE_NO_PAD.decode(p).unwrap()).unwrap();
        assert_eq!(decode(parts[0]), serde_json::json!({ "alg": "ES256", "typ": "JWT" }));
        let claims = decode(parts[1]);
        assert_eq!((claims["iss"].as_str(), claims["sub"].as_str()), (Some("client-1"), Some("client-1")));
        assert_eq!(claims["aud"], "https://as.example.com");
        assert_eq!((claims["iat"].as_u64(), claims["exp"].as_u64()), (Some(1_000), Some(1_300)));
        let signature = Signature::from_slice(&URL_SAFE_NO_PAD.decode(parts[2]).unwrap()).unwrap();
        let verifying = VerifyingKey::from(&key);
        verifying.verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &signature).unwrap();
    }

    #[test]
    fn a_key_that_is_not_p256_pkcs8_is_refused_without_quoting_it() {
        let e =
            client_assertion("-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----", "c", "a", UNIX_EPOCH)
                .unwrap_err();
        assert!(!e.contains("c2VjcmV0"), "{e}");
        assert!(e.contains("PKCS#8"), "{e}");
    }
}
