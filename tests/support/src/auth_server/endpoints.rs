//! The authorization server's endpoints: metadata, registration, authorization, token.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::time::{Duration, Instant};

use super::{AuthState, Client, Code, Grant, oauth_error};

pub(super) fn metadata(s: &AuthState) -> axum::Json<Value> {
    let mut metadata = json!({
        "issuer": s.issuer,
        "authorization_endpoint": format!("{}/authorize", s.issuer),
        "token_endpoint": format!("{}/token", s.issuer),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": s.options.token_endpoint_auth_methods,
    });
    if s.options.registration {
        metadata["registration_endpoint"] = json!(format!("{}/register", s.issuer));
    }
    if let Some(scopes) = &s.options.scopes_supported {
        metadata["scopes_supported"] = json!(scopes);
    }
    if let Some(cimd) = s.options.client_id_metadata_document_supported {
        metadata["client_id_metadata_document_supported"] = json!(cimd);
    }
    axum::Json(metadata)
}

pub(super) fn register(s: &mut AuthState, body: Value) -> Response {
    let redirect_uris = body["redirect_uris"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if redirect_uris.is_empty() {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_redirect_uri",
            "redirect_uris is required",
        );
    }
    let supported = &s.options.token_endpoint_auth_methods;
    let method = s.options.registered_auth_method.clone().unwrap_or_else(|| {
        body["token_endpoint_auth_method"]
            .as_str()
            .filter(|m| supported.iter().any(|s| s == m))
            .map(str::to_string)
            .or_else(|| supported.iter().find(|m| *m == "none").cloned())
            .unwrap_or_else(|| supported.first().cloned().unwrap_or_else(|| "none".into()))
    });
    s.counter += 1;
    let client_id = format!("client-{}", s.counter);
    let secret = (method != "none").then(|| format!("secret-{}", s.counter));
    s.clients.insert(
        client_id.clone(),
        Client {
            secret: secret.clone(),
            method: method.clone(),
        },
    );
    let mut answer = body.clone();
    answer["client_id"] = json!(client_id);
    answer["token_endpoint_auth_method"] = json!(method);
    answer["client_id_issued_at"] = json!(0);
    if let Some(secret) = secret {
        answer["client_secret"] = json!(secret);
        answer["client_secret_expires_at"] = json!(0);
    }
    (StatusCode::CREATED, axum::Json(answer)).into_response()
}

fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

pub(super) fn authorize(s: &mut AuthState, params: &[(String, String)]) -> Response {
    let Some(redirect_uri) = param(params, "redirect_uri") else {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "no redirect_uri",
        );
    };
    let Ok(mut target) = url::Url::parse(redirect_uri) else {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "bad redirect_uri",
        );
    };
    let client_id = param(params, "client_id").unwrap_or("").to_string();
    let cimd = s.options.client_id_metadata_document_supported == Some(true)
        && (client_id.starts_with("https://") || client_id.starts_with("http://"));
    let error = if !s.clients.contains_key(&client_id) && !cimd {
        Some("unauthorized_client")
    } else if param(params, "response_type") != Some("code") {
        Some("unsupported_response_type")
    } else if param(params, "code_challenge_method") != Some("S256")
        || param(params, "code_challenge").is_none()
    {
        Some("invalid_request")
    } else {
        s.options.authorize_error.as_deref()
    };
    {
        let mut query = target.query_pairs_mut();
        match error {
            Some(error) => {
                query.append_pair("error", error);
            }
            None => {
                s.counter += 1;
                let code = format!("code-{}", s.counter);
                s.codes.insert(
                    code.clone(),
                    Code {
                        client_id: client_id.clone(),
                        challenge: param(params, "code_challenge").map(str::to_string),
                        redirect_uri: redirect_uri.to_string(),
                        scope: param(params, "scope").map(str::to_string),
                    },
                );
                query.append_pair("code", &code);
            }
        }
        if let Some(state) = param(params, "state") {
            query.append_pair("state", state);
        }
    }
    Redirect::to(target.as_str()).into_response()
}

/// The client the request authenticates as, checked against its registered method.
fn authenticate(
    s: &AuthState,
    params: &[(String, String)],
    authorization: Option<&str>,
) -> Result<String, String> {
    let refuse = |why: &str| Err(why.to_string());
    let basic = authorization
        .and_then(|a| a.strip_prefix("Basic "))
        .and_then(|b| STANDARD.decode(b).ok())
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|pair| {
            let (id, secret) = pair.split_once(':')?;
            let decode = |t: &str| percent_decode(t);
            Some((decode(id), decode(secret)))
        });
    let client_id = match (&basic, param(params, "client_id")) {
        (Some((id, _)), _) => id.clone(),
        (None, Some(id)) => id.to_string(),
        (None, None) => return refuse("no client_id"),
    };
    let cimd = s.options.client_id_metadata_document_supported == Some(true)
        && (client_id.starts_with("https://") || client_id.starts_with("http://"));
    let client = match s.clients.get(&client_id) {
        Some(client) => client.clone(),
        None if cimd => Client {
            secret: None,
            method: "none".into(),
        },
        None => return refuse("unknown client"),
    };
    let body_secret = param(params, "client_secret");
    let ok = match client.method.as_str() {
        "client_secret_basic" => {
            body_secret.is_none()
                && basic
                    .as_ref()
                    .is_some_and(|(_, secret)| Some(secret) == client.secret.as_ref())
        }
        "client_secret_post" => {
            basic.is_none() && body_secret.is_some() && body_secret == client.secret.as_deref()
        }
        "none" => basic.is_none() && body_secret.is_none(),
        _ => false,
    };
    if !ok {
        return refuse(&format!(
            "the client must authenticate with {}",
            client.method
        ));
    }
    Ok(client_id)
}

fn percent_decode(text: &str) -> String {
    url::form_urlencoded::parse(format!("x={text}").as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

pub(super) fn token(
    s: &mut AuthState,
    params: &[(String, String)],
    authorization: Option<&str>,
) -> Response {
    let client_id = match authenticate(s, params, authorization) {
        Ok(id) => id,
        Err(why) => return oauth_error(StatusCode::UNAUTHORIZED, "invalid_client", &why),
    };
    let invalid = |why: &str| oauth_error(StatusCode::BAD_REQUEST, "invalid_grant", why);
    let scope = match param(params, "grant_type") {
        Some("authorization_code") => {
            let Some(code) = param(params, "code").and_then(|c| s.codes.remove(c)) else {
                return invalid("unknown or used code");
            };
            if code.client_id != client_id {
                return invalid("the code was issued to another client");
            }
            if param(params, "redirect_uri") != Some(code.redirect_uri.as_str()) {
                return invalid("redirect_uri differs from the authorization request's");
            }
            let computed = param(params, "code_verifier")
                .map(|v| URL_SAFE_NO_PAD.encode(Sha256::digest(v.as_bytes())));
            if computed.is_none() || computed != code.challenge {
                return invalid("code_verifier does not match the code_challenge");
            }
            code.scope
        }
        Some("refresh_token") => {
            let Some(grant) =
                param(params, "refresh_token").and_then(|t| s.refresh_tokens.remove(t))
            else {
                return invalid("unknown or rotated refresh token");
            };
            if grant.client_id != client_id {
                return invalid("the refresh token was issued to another client");
            }
            grant.scope
        }
        _ => {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "unsupported_grant_type",
                "authorization_code and refresh_token only",
            );
        }
    };
    s.counter += 1;
    let access = format!("access-{}", s.counter);
    let refresh = format!("refresh-{}", s.counter);
    let lifetime = Duration::from_secs(s.options.expires_in);
    s.access_tokens
        .insert(access.clone(), Instant::now() + lifetime);
    s.refresh_tokens.insert(
        refresh.clone(),
        Grant {
            client_id,
            scope: scope.clone(),
        },
    );
    let mut answer = json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": s.options.expires_in,
        "refresh_token": refresh,
    });
    if let Some(scope) = scope {
        answer["scope"] = json!(scope);
    }
    axum::Json(answer).into_response()
}
