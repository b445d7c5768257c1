//! A resource server's `WWW-Authenticate: Bearer …` challenge (RFC 6750 §3, RFC 9728 §5.1):
//! where its protected-resource metadata is, the scope it wants, and why it refused.
//!
//! The header may hold several challenges (`Basic realm="x", Bearer scope="a b"`, RFC 9110
//! §11.6.1), parameter names are case-insensitive and values are tokens or quoted strings with
//! `\` escapes; only the `Bearer` challenge is read.

/// The parameters of a `Bearer` challenge that matter to a client.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Challenge {
    /// `resource_metadata`: the URL of the protected-resource metadata.
    pub resource_metadata: Option<String>,
    /// `scope`: the scopes the request needs, space separated.
    pub scope: Option<String>,
    /// `error` (`invalid_token`, `insufficient_scope`, …).
    pub error: Option<String>,
}

impl Challenge {
    /// Parses a header value; a value with no `Bearer` challenge is an empty `Challenge`.
    pub(crate) fn parse(header: &str) -> Self {
        let mut challenge = Self::default();
        let mut in_bearer = false;
        for item in items(header) {
            match item {
                Item::Scheme(scheme) => in_bearer = scheme.eq_ignore_ascii_case("bearer"),
                Item::Param(name, value) if in_bearer => {
                    let slot = match name.to_ascii_lowercase().as_str() {
                        "resource_metadata" => &mut challenge.resource_metadata,
                        "scope" => &mut challenge.scope,
                        "error" => &mut challenge.error,
                        _ => continue,
                    };
                    // The first occurrence wins (a repeated parameter is invalid anyway).
                    if slot.is_none() && !value.trim().is_empty() {
                        *slot = Some(value);
                    }
                }
                Item::Param(..) => {}
            }
        }
        challenge
    }

    /// The challenge's scopes, one per entry.
    pub(crate) fn scopes(&self) -> Vec<String> {
        self.scope.as_deref().map(split_scope).unwrap_or_default()
    }

    /// The server refused a valid token for lack of scope (RFC 6750 §3.1): a step-up.
    pub(crate) fn is_insufficient_scope(&self) -> bool {
        self.error
            .as_deref()
            .is_some_and(|e| e.eq_ignore_ascii_case("insufficient_scope"))
    }
}

/// `"a  b c"` → `["a", "b", "c"]`.
pub(crate) fn split_scope(scope: &str) -> Vec<String> {
    scope.split_whitespace().map(str::to_string).collect()
}

enum Item {
    /// An auth-scheme starting a challenge.
    Scheme(String),
    /// `name=value` of the current challenge (token68 values are skipped).
    Param(String, String),
}

/// Splits the header into schemes and their parameters, in order.
fn items(header: &str) -> Vec<Item> {
    let mut out = Vec::new();
    let mut rest = header;
    loop {
        rest = rest.trim_start_matches(|c: char| c == ',' || c.is_whitespace());
        if rest.is_empty() {
            return out;
        }
        let (token, after) = take_token(rest);
        if token.is_empty() {
            // Not a token character: skip it rather than loop forever on garbage.
            let mut chars = rest.chars();
            chars.next();
            rest = chars.as_str();
            continue;
        }
        let after_ws = after.trim_start();
        if let Some(value_part) = after_ws.strip_prefix('=')
            && !value_part.starts_with('=')
        {
            let value_part = value_part.trim_start();
            let (value, remaining) = if let Some(quoted) = value_part.strip_prefix('"') {
                take_quoted(quoted)
            } else {
                let (value, remaining) = take_token(value_part);
                (value.to_string(), remaining)
            };
            out.push(Item::Param(token.to_string(), value));
            rest = remaining;
        } else if after_ws.starts_with('=') {
            // token68 padding (`abc==`): part of a scheme's opaque credentials.
            rest = after_ws.trim_start_matches('=');
        } else {
            out.push(Item::Scheme(token.to_string()));
            rest = after;
        }
    }
}

/// RFC 9110 `tchar`s (plus `/` and `:` seen in unquoted URLs from lax servers).
fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~/:".contains(c)
}

fn take_token(text: &str) -> (&str, &str) {
    let end = text
        .char_indices()
        .find(|(_, c)| !is_token_char(*c))
        .map_or(text.len(), |(i, _)| i);
    text.split_at(end)
}

/// The body of a quoted string (after the opening quote), unescaped, and what follows it.
fn take_quoted(text: &str) -> (String, &str) {
    let mut value = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return (value, &text[i + 1..]),
            '\\' => {
                if let Some((_, escaped)) = chars.next() {
                    value.push(escaped);
                }
            }
            other => value.push(other),
        }
    }
    // Unterminated: take the rest as the value.
    (value, "")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn challenge(rm: Option<&str>, scope: Option<&str>, error: Option<&str>) -> Challenge {
        Challenge {
            resource_metadata: rm.map(str::to_string),
            scope: scope.map(str::to_string),
            error: error.map(str::to_string),
        }
    }

    #[test]
    fn bearer_challenges_are_parsed_whatever_their_spelling() {
        let table = [
            ("Bearer", challenge(None, None, None)),
            (
                r#"Bearer resource_metadata="http://x/.well-known/oauth-protected-resource/mcp""#,
                challenge(
                    Some("http://x/.well-known/oauth-protected-resource/mcp"),
                    None,
                    None,
                ),
            ),
            (
                r#"Bearer error="insufficient_scope", scope="a b", resource_metadata="http://x/m""#,
                challenge(Some("http://x/m"), Some("a b"), Some("insufficient_scope")),
            ),
            (
                // Case-insensitive scheme and names, token values, no spaces after commas.
                r#"bearer Scope=files:read,ERROR=invalid_token,Resource_Metadata="u""#,
                challenge(Some("u"), Some("files:read"), Some("invalid_token")),
            ),
            (
                // Escapes inside a quoted string, and a comma inside quotes.
                r#"Bearer scope="a \"quoted\" b, c", error="x\\y""#,
                challenge(None, Some(r#"a "quoted" b, c"#), Some(r"x\y")),
            ),
            (
                // Several challenges: only Bearer's parameters count.
                r#"Basic realm="scope=evil", scope="no", Bearer realm="mcp", scope="mcp:basic""#,
                challenge(None, Some("mcp:basic"), None),
            ),
            (
                // A token68 scheme before the Bearer one.
                r#"Negotiate abc123==, Bearer scope="s""#,
                challenge(None, Some("s"), None),
            ),
            (
                // Bearer first, then another scheme with its own scope.
                r#"Bearer scope="one", DPoP algs="ES256", scope="two""#,
                challenge(None, Some("one"), None),
            ),
            ("Basic realm=\"x\"", challenge(None, None, None)),
            ("", challenge(None, None, None)),
            (
                // Unterminated quoted string and garbage do not panic.
                "Bearer scope=\"open , @@ ;;",
                challenge(None, Some("open , @@ ;;"), None),
            ),
        ];
        for (header, expected) in table {
            assert_eq!(Challenge::parse(header), expected, "{header}");
        }
    }

    #[test]
    fn insufficient_scope_and_scopes() {
        let parsed = Challenge::parse(r#"Bearer error="Insufficient_Scope", scope=" a  b ""#);
        assert!(parsed.is_insufficient_scope());
        assert_eq!(parsed.scopes(), ["a", "b"]);
        assert!(!Challenge::parse("Bearer error=invalid_token").is_insufficient_scope());
        assert!(Challenge::parse("Bearer").scopes().is_empty());
    }
}
