use super::*;

/// A P-256 key made for these tests only (`openssl genpkey -algorithm EC`).
const EC_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgJY+hti+IS/4VTmYw
LJZbFqJaLZtqhxm6N00Ayn2rfZihRANCAAQ8HfXXErQ+fPXZrUQpWBO+ldhAtA08
NlV1mIpwFU99it+D2t/VlISNpPFYtRDoQiFrXH9uyU/rcy6P9xP4aaug
-----END PRIVATE KEY-----
";
const EC_PUBLIC: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEPB311xK0Pnz12a1EKVgTvpXYQLQN
PDZVdZiKcBVPfYrfg9rf1ZSEjaTxWLUQ6EIha1x/bslP63Muj/cT+GmroA==
-----END PUBLIC KEY-----
";

fn request(method: TokenAuthMethod, grant: Grant) -> TokenRequest {
    TokenRequest {
        token_endpoint: "https://as.example/token".into(),
        client: ClientCredentials {
            client_id: "app id".into(),
            client_secret: Some(Secret::new("s:cr&t")),
            private_key: Some(Secret::new(EC_KEY)),
            signing_algorithm: None,
            method,
        },
        grant,
        scope: Some("a b".into()),
        resource: Some("https://mcp.example/mcp".into()),
        audience: None,
        issuer: Some("https://as.example".into()),
    }
}

fn fields(form: &Form) -> Vec<(&str, &str)> {
    form.iter().map(|(k, v)| (*k, v.expose())).collect()
}

/// Configured method, has a key, has a secret, what the server lists → the method used.
type Case<'a> = (
    Option<TokenAuthMethod>,
    bool,
    bool,
    Option<&'a [String]>,
    TokenAuthMethod,
);

#[test]
fn the_method_follows_the_settings_then_what_the_server_lists() {
    let list = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    let basic_only = list(&["client_secret_basic"]);
    let post_only = list(&["client_secret_post"]);
    let none_only = list(&["none"]);
    use TokenAuthMethod as M;
    let table: [Case; 9] = [
        (
            Some(M::ClientSecretPost),
            true,
            true,
            Some(&basic_only),
            M::ClientSecretPost,
        ),
        (None, true, true, None, M::PrivateKeyJwt),
        (None, true, true, Some(&basic_only), M::ClientSecretBasic),
        (None, false, true, None, M::ClientSecretBasic),
        (None, false, true, Some(&[]), M::ClientSecretBasic),
        (None, false, true, Some(&post_only), M::ClientSecretPost),
        (None, false, true, Some(&none_only), M::ClientSecretBasic),
        (None, false, false, Some(&basic_only), M::None),
        (None, true, false, Some(&basic_only), M::PrivateKeyJwt),
    ];
    for (configured, key, secret, supported, expected) in table {
        assert_eq!(
            choose_method(configured, key, secret, supported),
            expected,
            "{configured:?} key={key} secret={secret} {supported:?}"
        );
    }
}

#[test]
fn client_secret_basic_form_encodes_the_pair_and_keeps_it_out_of_the_body() {
    let (form, basic) = build_form(&request(
        TokenAuthMethod::ClientSecretBasic,
        Grant::ClientCredentials,
    ))
    .unwrap();
    assert_eq!(
        fields(&form),
        [
            ("grant_type", "client_credentials"),
            ("scope", "a b"),
            ("resource", "https://mcp.example/mcp"),
        ]
    );
    let basic = basic.unwrap();
    let encoded = basic.expose().strip_prefix("Basic ").unwrap();
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .unwrap();
    assert_eq!(String::from_utf8(decoded).unwrap(), "app+id:s%3Acr%26t");
}

#[test]
fn client_secret_post_none_and_grants_put_what_they_need_in_the_form() {
    let (form, basic) = build_form(&request(
        TokenAuthMethod::ClientSecretPost,
        Grant::RefreshToken(Secret::new("r1")),
    ))
    .unwrap();
    assert!(basic.is_none());
    assert_eq!(
        fields(&form),
        [
            ("grant_type", "refresh_token"),
            ("refresh_token", "r1"),
            ("scope", "a b"),
            ("resource", "https://mcp.example/mcp"),
            ("client_id", "app id"),
            ("client_secret", "s:cr&t"),
        ]
    );
    let (form, basic) = build_form(&request(
        TokenAuthMethod::None,
        Grant::AuthorizationCode {
            code: Secret::new("c"),
            code_verifier: Secret::new("v"),
            redirect_uri: "http://127.0.0.1:1/callback".into(),
        },
    ))
    .unwrap();
    assert!(basic.is_none());
    assert_eq!(
        fields(&form),
        [
            ("grant_type", "authorization_code"),
            ("code", "c"),
            ("code_verifier", "v"),
            ("redirect_uri", "http://127.0.0.1:1/callback"),
            ("scope", "a b"),
            ("resource", "https://mcp.example/mcp"),
            ("client_id", "app id"),
        ]
    );
}

#[test]
fn private_key_jwt_signs_an_assertion_for_the_issuer() {
    let (form, basic) = build_form(&request(
        TokenAuthMethod::PrivateKeyJwt,
        Grant::ClientCredentials,
    ))
    .unwrap();
    assert!(basic.is_none());
    let get = |name: &str| {
        form.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.expose().to_string())
            .unwrap()
    };
    assert_eq!(get("client_assertion_type"), JWT_BEARER);
    assert!(!form.iter().any(|(k, _)| *k == "client_secret"));
    let jwt = get("client_assertion");
    let header = jsonwebtoken::decode_header(&jwt).unwrap();
    assert_eq!(header.alg, Algorithm::ES256, "from the key type");
    let mut validation = jsonwebtoken::Validation::new(Algorithm::ES256);
    validation.set_audience(&["https://as.example"]);
    let decoded = jsonwebtoken::decode::<serde_json::Value>(
        &jwt,
        &jsonwebtoken::DecodingKey::from_ec_pem(EC_PUBLIC.as_bytes()).unwrap(),
        &validation,
    )
    .unwrap();
    let claims = decoded.claims;
    assert_eq!(claims["iss"], "app id");
    assert_eq!(claims["sub"], "app id");
    assert_eq!(claims["aud"], "https://as.example");
    assert!(claims["jti"].as_str().is_some_and(|j| j.len() >= 16));
    let (iat, exp) = (
        claims["iat"].as_u64().unwrap(),
        claims["exp"].as_u64().unwrap(),
    );
    assert_eq!(exp - iat, ASSERTION_LIFETIME.as_secs());
}

#[test]
fn a_bad_key_or_algorithm_says_which_setting_to_fix() {
    let mut bad_key = request(TokenAuthMethod::PrivateKeyJwt, Grant::ClientCredentials);
    bad_key.client.private_key = Some(Secret::new("not a pem"));
    let error = build_form(&bad_key).unwrap_err().to_string();
    assert!(
        error.contains("oauth.private_key") && error.contains("PKCS#8"),
        "{error}"
    );

    let mut wrong_alg = request(TokenAuthMethod::PrivateKeyJwt, Grant::ClientCredentials);
    wrong_alg.client.signing_algorithm = Some("RS256".into());
    let error = build_form(&wrong_alg).unwrap_err().to_string();
    assert!(
        error.contains("with RS256") && error.contains("oauth.signing_algorithm"),
        "{error}"
    );

    let mut unknown = request(TokenAuthMethod::PrivateKeyJwt, Grant::ClientCredentials);
    unknown.client.signing_algorithm = Some("XX1".into());
    let error = build_form(&unknown).unwrap_err().to_string();
    assert!(error.contains("\"XX1\""), "{error}");

    let mut no_secret = request(TokenAuthMethod::ClientSecretPost, Grant::ClientCredentials);
    no_secret.client.client_secret = None;
    let error = build_form(&no_secret).unwrap_err().to_string();
    assert!(error.contains("needs oauth.client_secret"), "{error}");
}

#[test]
fn an_error_answer_is_named_with_what_to_check() {
    let req = request(TokenAuthMethod::ClientSecretBasic, Grant::ClientCredentials);
    let error = refusal(
        "https://as.example/token",
        401,
        r#"{"error":"invalid_client","error_description":"bad secret"}"#,
        &req,
    )
    .to_string();
    assert!(error.contains("invalid_client"), "{error}");
    assert!(error.contains("bad secret"), "{error}");
    assert!(error.contains("client_secret_basic"), "{error}");
    assert!(!error.contains("s:cr&t"), "never the secret: {error}");
    let error = refusal("https://as.example/token", 502, "<html>", &req).to_string();
    assert!(error.contains("HTTP 502"), "{error}");
}
