//! `GET /`: the web chat, a single page on the HTTP API, so a fresh install can be used from a
//! browser with no set-up (on loopback without tokens it acts as the local user).
//!
//! Everything the page needs is compiled into the binary: the HTML, one stylesheet, the scripts
//! (ES modules, split by job) and the vendored Markdown renderer and sanitizer
//! (`assets/vendor/README.md` names their versions). Assets live under `/assets/{version}/…`,
//! where the version is a hash of their bytes, so they can be cached for a year; the HTML itself
//! is never cached, so a new binary's page always names its own assets. The page's
//! Content-Security-Policy allows only this origin's scripts and styles, nothing inline: model
//! output that slipped past the sanitizer still could not run.

use std::sync::OnceLock;

use axum::extract::Path;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::http::ApiError;

/// The page's policy: same-origin scripts, styles, fetches and images (blob: for files loaded
/// with a token, data: for inline images in answers); no plugins, frames, forms elsewhere or
/// `<base>` rewrites.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; \
     manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; \
     object-src 'none'";

const INDEX: &str = include_str!("assets/index.html");
const FAVICON_SVG: &[u8] = include_bytes!("assets/favicon.svg");
const FAVICON_ICO: &[u8] = include_bytes!("assets/favicon.ico");

const JS: &str = "text/javascript; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";

/// `(path under /assets/{version}/, content type, bytes)`.
const ASSETS: &[(&str, &str, &[u8])] = &[
    (
        "chat.css",
        "text/css; charset=utf-8",
        include_bytes!("assets/chat.css"),
    ),
    ("js/app.js", JS, include_bytes!("assets/js/app.js")),
    ("js/api.js", JS, include_bytes!("assets/js/api.js")),
    (
        "js/approval.js",
        JS,
        include_bytes!("assets/js/approval.js"),
    ),
    (
        "js/artifact.js",
        JS,
        include_bytes!("assets/js/artifact.js"),
    ),
    ("js/chat.js", JS, include_bytes!("assets/js/chat.js")),
    (
        "js/composer.js",
        JS,
        include_bytes!("assets/js/composer.js"),
    ),
    (
        "js/commands.js",
        JS,
        include_bytes!("assets/js/commands.js"),
    ),
    ("js/files.js", JS, include_bytes!("assets/js/files.js")),
    (
        "js/markdown.js",
        JS,
        include_bytes!("assets/js/markdown.js"),
    ),
    (
        "js/schedules.js",
        JS,
        include_bytes!("assets/js/schedules.js"),
    ),
    ("js/sidebar.js", JS, include_bytes!("assets/js/sidebar.js")),
    ("js/signin.js", JS, include_bytes!("assets/js/signin.js")),
    ("js/steps.js", JS, include_bytes!("assets/js/steps.js")),
    ("js/threads.js", JS, include_bytes!("assets/js/threads.js")),
    ("js/turn.js", JS, include_bytes!("assets/js/turn.js")),
    (
        "vendor/marked.esm.js",
        JS,
        include_bytes!("assets/vendor/marked.esm.js"),
    ),
    (
        "vendor/purify.es.mjs",
        JS,
        include_bytes!("assets/vendor/purify.es.mjs"),
    ),
    (
        "vendor/LICENSE-marked.txt",
        TEXT,
        include_bytes!("assets/vendor/LICENSE-marked.txt"),
    ),
    (
        "vendor/LICENSE-dompurify.txt",
        TEXT,
        include_bytes!("assets/vendor/LICENSE-dompurify.txt"),
    ),
    (
        "vendor/README.md",
        "text/markdown; charset=utf-8",
        include_bytes!("assets/vendor/README.md"),
    ),
];

const NO_CACHE: &str = "no-cache";
const IMMUTABLE: &str = "public, max-age=31536000, immutable";
const A_DAY: &str = "public, max-age=86400";

/// The assets' version: the first 12 hex digits of an FNV-1a hash over every asset, computed
/// once. A stable, dependency-free hash is enough: it only has to change when a byte changes.
pub(crate) fn asset_version() -> &'static str {
    static VERSION: OnceLock<String> = OnceLock::new();
    VERSION.get_or_init(|| {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for (path, _, bytes) in ASSETS {
            for byte in path.as_bytes().iter().chain(bytes.iter()) {
                hash ^= u64::from(*byte);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        }
        format!("{:012x}", hash >> 16)
    })
}

fn page() -> &'static str {
    static PAGE: OnceLock<String> = OnceLock::new();
    PAGE.get_or_init(|| INDEX.replace("{{VERSION}}", asset_version()))
}

fn security_headers() -> [(HeaderName, HeaderValue); 3] {
    [
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("same-origin"),
        ),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
    ]
}

pub(crate) async fn index() -> Response {
    (
        security_headers(),
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, NO_CACHE),
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        ],
        page(),
    )
        .into_response()
}

pub(crate) async fn favicon_svg() -> Response {
    (
        security_headers(),
        [
            (header::CONTENT_TYPE, "image/svg+xml"),
            (header::CACHE_CONTROL, A_DAY),
        ],
        FAVICON_SVG,
    )
        .into_response()
}

pub(crate) async fn favicon_ico() -> Response {
    (
        security_headers(),
        [
            (header::CONTENT_TYPE, "image/x-icon"),
            (header::CACHE_CONTROL, A_DAY),
        ],
        FAVICON_ICO,
    )
        .into_response()
}

/// `GET /assets/{version}/{*path}`. A stale version (a page from an older binary still open)
/// is a 404 rather than today's bytes under an immutable URL that promised other ones.
pub(crate) async fn asset(Path((version, path)): Path<(String, String)>) -> Response {
    let found = ASSETS.iter().find(|(name, _, _)| *name == path);
    match found {
        Some((_, content_type, bytes)) if version == asset_version() => (
            security_headers(),
            [
                (header::CONTENT_TYPE, *content_type),
                (header::CACHE_CONTROL, IMMUTABLE),
            ],
            *bytes,
        )
            .into_response(),
        _ => ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no web chat asset {version}/{path}; reload the page to get the current one"),
        )
        .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_versioned_assets_that_exist() {
        let page = page();
        assert!(!page.contains("{{VERSION}}"));
        let prefix = format!("/assets/{}/", asset_version());
        let mut named = 0;
        for part in page.split(&prefix).skip(1) {
            let path = part.split('"').next().unwrap();
            assert!(ASSETS.iter().any(|(name, _, _)| *name == path), "{path}");
            named += 1;
        }
        assert_eq!(named, 2, "the stylesheet and the entry module");
    }

    #[test]
    fn every_module_import_is_a_served_asset() {
        for (name, _, bytes) in ASSETS.iter().filter(|(n, _, _)| n.starts_with("js/")) {
            let text = std::str::from_utf8(bytes).unwrap();
            for line in text.lines().filter(|l| l.contains(" from \"")) {
                let target = line
                    .split(" from \"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap();
                let resolved = match target.strip_prefix("../") {
                    Some(rest) => rest.to_string(),
                    None => format!("js/{}", target.trim_start_matches("./")),
                };
                assert!(
                    ASSETS.iter().any(|(n, _, _)| *n == resolved),
                    "{name} imports {target}, which is not served"
                );
            }
        }
    }

    #[test]
    fn the_policy_allows_nothing_inline_or_foreign() {
        for forbidden in ["unsafe-inline", "unsafe-eval", "http:", "https:", "*"] {
            assert!(!CONTENT_SECURITY_POLICY.contains(forbidden), "{forbidden}");
        }
        assert!(
            !INDEX.contains("<script>") && !INDEX.contains("<style") && !INDEX.contains("style=")
        );
    }
}
