//! Artifacts: mapping a virtual path (`/mnt/user-data/outputs/x`) to a file of one thread, safely,
//! and deciding how it may be served.
//!
//! The checks run in two stages: lexical (no `..`, only the two allowed roots) before any path
//! is built, then physical (the canonical path must stay inside the canonical root) so a symlink
//! planted in outputs cannot point the server at `/etc/passwd`.

use std::path::{Path, PathBuf};

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

pub const OUTPUTS_VIRTUAL: &str = "/mnt/user-data/outputs";
pub const UPLOADS_VIRTUAL: &str = "/mnt/user-data/uploads";

/// MIME types shown in the browser: formats no browser runs script in. Everything else (HTML,
/// XHTML, SVG, XML, which Chromium renders with its scripts, and any type not known to be
/// passive) is a download. `audio/*` and `video/*` are passive too.
const INLINE_TYPES: &[&str] = &[
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
    "image/avif",
    "image/bmp",
    "image/x-icon",
    "image/vnd.microsoft.icon",
    "application/pdf",
    "text/plain",
    "text/csv",
    "text/markdown",
    "application/json",
];

/// The policy every artifact is served with: a sandboxed document (no script, no same origin
/// with the API) that loads nothing. Images and PDFs still display; it only matters if a file
/// is ever shown as a page.
pub const ARTIFACT_CSP: &str = "sandbox; default-src 'none'";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ArtifactError {
    #[error(
        "artifact paths must start with {OUTPUTS_VIRTUAL}/ or {UPLOADS_VIRTUAL}/ and contain no '..'"
    )]
    Forbidden,
    /// The path is well formed but is (or passes through) a symlink leading out of the thread's
    /// directory; serving it could hand out any file the daemon can read.
    #[error(
        "{0} is a symlink (or lies under one) pointing outside this thread's files, so it is \
         not served; ask the agent to copy the file itself into {OUTPUTS_VIRTUAL}/"
    )]
    OutsideThread(String),
    #[error(
        "no artifact at {0}; list the thread's files with GET /api/threads/{{thread_id}}/state \
         (values.artifacts) or GET /api/threads/{{thread_id}}/uploads/list"
    )]
    NotFound(String),
}

/// Which thread directory a virtual path lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArtifactRoot {
    Outputs,
    Uploads,
}

/// Splits a virtual path (leading `/` optional) into its root and the relative remainder.
pub fn parse_virtual_path(virtual_path: &str) -> Result<(ArtifactRoot, PathBuf), ArtifactError> {
    let trimmed = virtual_path.trim_start_matches('/');
    let (root, rest) = [
        (ArtifactRoot::Outputs, &OUTPUTS_VIRTUAL[1..]),
        (ArtifactRoot::Uploads, &UPLOADS_VIRTUAL[1..]),
    ]
    .into_iter()
    .find_map(|(root, prefix)| {
        trimmed
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix('/'))
            .map(|rest| (root, rest))
    })
    .ok_or(ArtifactError::Forbidden)?;
    let mut relative = PathBuf::new();
    for segment in rest.split('/') {
        match segment {
            "" | "." => continue,
            ".." => return Err(ArtifactError::Forbidden),
            s if s.contains('\\') || s.contains('\0') => return Err(ArtifactError::Forbidden),
            s => relative.push(s),
        }
    }
    if relative.as_os_str().is_empty() {
        return Err(ArtifactError::Forbidden);
    }
    Ok((root, relative))
}

/// Resolves a virtual path against the thread's `outputs` and `uploads` directories and returns
/// the canonical host path of an existing regular file inside them.
pub fn resolve_artifact(
    outputs_dir: &Path,
    uploads_dir: &Path,
    virtual_path: &str,
) -> Result<PathBuf, ArtifactError> {
    let (root, relative) = parse_virtual_path(virtual_path)?;
    let root_dir = match root {
        ArtifactRoot::Outputs => outputs_dir,
        ArtifactRoot::Uploads => uploads_dir,
    };
    let not_found = || ArtifactError::NotFound(display_virtual(virtual_path));
    let canonical_root = root_dir.canonicalize().map_err(|_| not_found())?;
    let canonical = root_dir
        .join(&relative)
        .canonicalize()
        .map_err(|_| not_found())?;
    if !canonical.starts_with(&canonical_root) {
        return Err(ArtifactError::OutsideThread(display_virtual(virtual_path)));
    }
    if !canonical.is_file() {
        return Err(not_found());
    }
    Ok(canonical)
}

/// The virtual path as the client should see it: always with its leading `/`.
fn display_virtual(virtual_path: &str) -> String {
    format!("/{}", virtual_path.trim_start_matches('/'))
}

/// Whether a file must be sent as an attachment rather than displayed inline: when asked, and
/// for every type not on the passive list.
pub fn must_download(mime: &str, download_requested: bool) -> bool {
    let mime = mime.to_ascii_lowercase();
    let passive = INLINE_TYPES.contains(&mime.as_str())
        || mime.starts_with("audio/")
        || mime.starts_with("video/");
    download_requested || !passive
}

/// Characters kept verbatim in RFC 5987 `filename*` values (attr-char).
const ATTR_CHAR: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'!')
    .remove(b'#')
    .remove(b'$')
    .remove(b'&')
    .remove(b'+')
    .remove(b'-')
    .remove(b'.')
    .remove(b'^')
    .remove(b'_')
    .remove(b'`')
    .remove(b'|')
    .remove(b'~');

/// A `Content-Disposition` value with an ASCII fallback and the RFC 5987 UTF-8 name.
pub fn content_disposition(filename: &str, attachment: bool) -> String {
    let kind = if attachment { "attachment" } else { "inline" };
    let ascii: String = filename
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let encoded = utf8_percent_encode(filename, ATTR_CHAR);
    format!("{kind}; filename=\"{ascii}\"; filename*=UTF-8''{encoded}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn virtual_path_table() {
        let ok: &[(&str, ArtifactRoot, &str)] = &[
            (
                "mnt/user-data/outputs/a.txt",
                ArtifactRoot::Outputs,
                "a.txt",
            ),
            (
                "/mnt/user-data/outputs/sub/b.csv",
                ArtifactRoot::Outputs,
                "sub/b.csv",
            ),
            (
                "/mnt/user-data/uploads/c.pdf",
                ArtifactRoot::Uploads,
                "c.pdf",
            ),
            (
                "/mnt/user-data/outputs/./d.txt",
                ArtifactRoot::Outputs,
                "d.txt",
            ),
        ];
        for (input, root, rel) in ok {
            let (got_root, got_rel) = parse_virtual_path(input).unwrap();
            assert_eq!(
                (got_root, got_rel.to_str().unwrap()),
                (*root, *rel),
                "{input}"
            );
        }
        for bad in [
            "/mnt/user-data/outputs/../../etc/passwd",
            "/mnt/user-data/outputs/..",
            "/mnt/user-data/workspace/a.txt",
            "/etc/passwd",
            "/mnt/user-data/outputs",
            "/mnt/user-data/outputs/",
            "/mnt/user-data/outputsx/a",
            "/mnt/user-data/outputs/a\\..\\b",
        ] {
            assert_eq!(
                parse_virtual_path(bad),
                Err(ArtifactError::Forbidden),
                "{bad}"
            );
        }
    }

    #[test]
    fn resolve_rejects_symlink_escape_and_missing_files() {
        let base = tempfile::tempdir().unwrap();
        let outputs = base.path().join("outputs");
        let uploads = base.path().join("uploads");
        fs::create_dir_all(&outputs).unwrap();
        fs::create_dir_all(&uploads).unwrap();
        fs::write(outputs.join("report.md"), "# hi").unwrap();
        let secret = base.path().join("secret.txt");
        fs::write(&secret, "secret").unwrap();
        std::os::unix::fs::symlink(&secret, outputs.join("link.txt")).unwrap();

        let found =
            resolve_artifact(&outputs, &uploads, "/mnt/user-data/outputs/report.md").unwrap();
        assert_eq!(fs::read_to_string(found).unwrap(), "# hi");
        let escaped =
            resolve_artifact(&outputs, &uploads, "mnt/user-data/outputs/link.txt").unwrap_err();
        assert_eq!(
            escaped,
            ArtifactError::OutsideThread("/mnt/user-data/outputs/link.txt".into())
        );
        let message = escaped.to_string();
        assert!(message.contains("symlink"), "{message}");
        assert!(!message.contains("must start with"), "{message}");
        assert!(
            !message.contains(base.path().to_str().unwrap()),
            "{message}"
        );
        assert!(matches!(
            resolve_artifact(&outputs, &uploads, "/mnt/user-data/uploads/none.txt"),
            Err(ArtifactError::NotFound(_))
        ));
    }

    #[test]
    fn only_passive_types_are_inline() {
        for active in [
            "text/html",
            "image/svg+xml",
            "application/xhtml+xml",
            "text/xml",
            "application/xml",
            "application/xslt+xml",
            "text/javascript",
            "application/octet-stream",
            "application/x-unknown",
            "image/tiff",
        ] {
            assert!(must_download(active, false), "{active}");
        }
        for passive in [
            "image/png",
            "IMAGE/JPEG",
            "application/pdf",
            "text/plain",
            "application/json",
            "audio/mpeg",
            "video/mp4",
        ] {
            assert!(!must_download(passive, false), "{passive}");
        }
        assert!(must_download("text/plain", true));
    }

    #[test]
    fn disposition_has_ascii_fallback_and_utf8_name() {
        assert_eq!(
            content_disposition("report.pdf", true),
            "attachment; filename=\"report.pdf\"; filename*=UTF-8''report.pdf"
        );
        assert_eq!(
            content_disposition("报告 \"v1\".pdf", false),
            "inline; filename=\"__ _v1_.pdf\"; filename*=UTF-8''%E6%8A%A5%E5%91%8A%20%22v1%22.pdf"
        );
    }
}
