//! Thread uploads on disk: filename sanitising, collision-free names, writes that never follow
//! a symlink, listing and deletion.
//!
//! Everything here works on an already-validated uploads directory (see `paths`); the HTTP and
//! channel layers call it after they checked who owns the thread.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

pub mod convert;
pub mod limits;

/// Longest accepted filename, in UTF-8 bytes (the common file-system limit).
pub const MAX_FILENAME_BYTES: usize = 255;

/// Prefix of in-progress files; they are never listed.
const STAGING_PREFIX: &str = ".upload-";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UploadError {
    #[error("filename is empty; give the file a name")]
    EmptyName,
    #[error("filename {0:?} contains a '..' path segment; upload the file under its own name")]
    Traversal(String),
    #[error("filename {0:?} contains a backslash; rename the file without '\\'")]
    Backslash(String),
    #[error("filename {0:?} contains control characters; rename the file")]
    ControlCharacters(String),
    #[error("filename is {0} bytes long; the limit is 255 bytes")]
    TooLong(usize),
    #[error(
        "{0} already exists as a symlink or special file; refusing to write through it, \
         store the file under another name"
    )]
    NotARegularFile(String),
    /// Deleting is refused for anything but a regular file: a symlink may point anywhere.
    #[error(
        "{0:?} is a symlink or special file, not an uploaded file, so it was left in place; \
         if it should not be there, remove it from the thread's uploads directory on the server"
    )]
    NotDeletable(String),
    /// The uploads directory itself was replaced by a symlink or a file (never by antler).
    #[error(
        "the thread's uploads directory is a symlink or not a directory, so nothing is written \
         there; remove it on the server (antler recreates it) and upload again"
    )]
    UnusableDirectory,
    #[error(
        "no upload named {0:?}; list the thread's uploads with \
         GET /api/threads/{{thread_id}}/uploads/list"
    )]
    NotFound(String),
    #[error("could not write the upload: {0}")]
    Io(String),
}

impl From<std::io::Error> for UploadError {
    fn from(e: std::io::Error) -> Self {
        UploadError::Io(e.to_string())
    }
}

/// One stored upload as the API and the agent see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UploadInfo {
    pub filename: String,
    pub size: u64,
    /// `/mnt/user-data/uploads/<filename>`: the only path the agent ever sees.
    pub path: String,
    pub is_image: bool,
}

/// Reduces a client-supplied name to a safe basename, or says why it cannot.
///
/// A name with a `..` segment is refused outright rather than silently stripped: the client
/// asked for something odd and should hear about it.
pub fn normalize_filename(raw: &str) -> Result<String, UploadError> {
    if raw.contains('\\') {
        return Err(UploadError::Backslash(raw.to_string()));
    }
    if raw.split('/').any(|segment| segment == "..") {
        return Err(UploadError::Traversal(raw.to_string()));
    }
    if raw.chars().any(char::is_control) {
        return Err(UploadError::ControlCharacters(raw.to_string()));
    }
    let base = raw.rsplit('/').next().unwrap_or("").trim();
    if base.is_empty() || base == "." {
        return Err(UploadError::EmptyName);
    }
    if base.len() > MAX_FILENAME_BYTES {
        return Err(UploadError::TooLong(base.len()));
    }
    Ok(base.to_string())
}

/// A name that does not exist in `dir` yet: `name.ext`, then `name_1.ext`, `name_2.ext`, …
pub fn unique_filename(dir: &Path, name: &str) -> String {
    if fs::symlink_metadata(dir.join(name)).is_err() {
        return name.to_string();
    }
    let (stem, ext) = split_extension(name);
    (1..)
        .map(|n| format!("{stem}_{n}{ext}"))
        .find(|candidate| fs::symlink_metadata(dir.join(candidate)).is_err())
        .unwrap_or_else(|| name.to_string())
}

pub(crate) fn split_extension(name: &str) -> (&str, &str) {
    match name.rfind('.') {
        Some(dot) if dot > 0 => (&name[..dot], &name[dot..]),
        _ => (name, ""),
    }
}

/// Creates `dir/name` exclusively and writes `bytes`; never follows or replaces a symlink.
///
/// `O_EXCL` makes the create fail on anything already at that path, including a dangling
/// symlink planted there, and `O_NOFOLLOW` is kept as a second guard.
pub fn write_new_file(dir: &Path, name: &str, bytes: &[u8]) -> Result<PathBuf, UploadError> {
    let path = dir.join(name);
    let mut file = open_exclusive(&path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            UploadError::NotARegularFile(name.to_string())
        } else {
            UploadError::from(e)
        }
    })?;
    if let Err(e) = file.write_all(bytes).and_then(|_| file.sync_data()) {
        let _ = fs::remove_file(&path);
        return Err(e.into());
    }
    Ok(path)
}

fn open_exclusive(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o644)
        .open(path)
}

/// Stores an upload under a sanitized, collision-free name in `dir` (created if missing).
pub fn store_upload(dir: &Path, raw_name: &str, bytes: &[u8]) -> Result<UploadInfo, UploadError> {
    let name = normalize_filename(raw_name)?;
    ensure_real_dir(dir)?;
    // Retry on a lost race with a concurrent upload of the same name.
    for _ in 0..16 {
        let candidate = unique_filename(dir, &name);
        match write_new_file(dir, &candidate, bytes) {
            Ok(_) => return Ok(info(&candidate, bytes.len() as u64)),
            Err(UploadError::NotARegularFile(_)) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(UploadError::Io(format!(
        "could not find a free name for {name:?}; delete some uploads and retry"
    )))
}

/// Lists regular files in `dir`, sorted by name (staging files and symlinks are skipped).
pub fn list_uploads(dir: &Path) -> Result<Vec<UploadInfo>, UploadError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry?;
        let meta = entry.metadata()?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if !entry.file_type()?.is_file() || name.starts_with(STAGING_PREFIX) {
            continue;
        }
        files.push(info(&name, meta.len()));
    }
    files.sort_by(|a, b| a.filename.cmp(&b.filename));
    Ok(files)
}

/// Deletes one upload (and its converted `.md` sibling, if any). Symlinks are refused.
pub fn delete_upload(dir: &Path, raw_name: &str) -> Result<(), UploadError> {
    let name = normalize_filename(raw_name)?;
    let path = dir.join(&name);
    let meta = fs::symlink_metadata(&path).map_err(|_| UploadError::NotFound(name.clone()))?;
    if !meta.file_type().is_file() {
        return Err(UploadError::NotDeletable(name));
    }
    fs::remove_file(&path)?;
    let (stem, ext) = split_extension(&name);
    if ext != ".md" {
        let converted = dir.join(format!("{stem}.md"));
        if fs::symlink_metadata(&converted).is_ok_and(|m| m.file_type().is_file()) {
            let _ = fs::remove_file(converted);
        }
    }
    Ok(())
}

/// Sum of the sizes of the files already in `dir` (for the total-size limit).
pub fn total_size(dir: &Path) -> Result<u64, UploadError> {
    Ok(list_uploads(dir)?.iter().map(|f| f.size).sum())
}

fn ensure_real_dir(dir: &Path) -> Result<(), UploadError> {
    fs::create_dir_all(dir)?;
    let meta = fs::symlink_metadata(dir)?;
    if !meta.file_type().is_dir() {
        // Never name the host path: clients only ever see virtual paths.
        return Err(UploadError::UnusableDirectory);
    }
    Ok(())
}

fn info(name: &str, size: u64) -> UploadInfo {
    let mime = mime_guess::from_path(name).first_or_octet_stream();
    UploadInfo {
        filename: name.to_string(),
        size,
        path: format!("/mnt/user-data/uploads/{name}"),
        is_image: mime.type_() == mime_guess::mime::IMAGE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_table() {
        let cases: &[(&str, Result<&str, &str>)] = &[
            ("report.pdf", Ok("report.pdf")),
            ("dir/report.pdf", Ok("report.pdf")),
            ("/abs/path/a.txt", Ok("a.txt")),
            ("  spaced.txt ", Ok("spaced.txt")),
            (".env", Ok(".env")),
            ("../x", Err("traversal")),
            ("a/../../b", Err("traversal")),
            ("..", Err("traversal")),
            ("a\\b.txt", Err("backslash")),
            ("", Err("empty")),
            (".", Err("empty")),
            ("dir/", Err("empty")),
            ("bad\u{0}name", Err("control")),
        ];
        for (raw, expected) in cases {
            let got = normalize_filename(raw);
            match (expected, &got) {
                (Ok(name), Ok(got_name)) => assert_eq!(got_name, name, "{raw:?}"),
                (Err("traversal"), Err(UploadError::Traversal(_)))
                | (Err("backslash"), Err(UploadError::Backslash(_)))
                | (Err("empty"), Err(UploadError::EmptyName))
                | (Err("control"), Err(UploadError::ControlCharacters(_))) => {}
                _ => panic!("{raw:?}: expected {expected:?}, got {got:?}"),
            }
        }
        let long = "a".repeat(256);
        assert_eq!(normalize_filename(&long), Err(UploadError::TooLong(256)));
        assert!(normalize_filename(&"a".repeat(255)).is_ok());
    }

    #[test]
    fn collisions_get_numbered_suffixes() {
        let dir = tempfile::tempdir().unwrap();
        let names: Vec<String> = (0..3)
            .map(|_| store_upload(dir.path(), "data.csv", b"x").unwrap().filename)
            .collect();
        assert_eq!(names, ["data.csv", "data_1.csv", "data_2.csv"]);
        let no_ext: Vec<String> = (0..2)
            .map(|_| store_upload(dir.path(), "README", b"x").unwrap().filename)
            .collect();
        assert_eq!(no_ext, ["README", "README_1"]);
    }

    #[test]
    fn never_writes_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("victim.txt");
        fs::write(&target, b"original").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join("victim.txt")).unwrap();

        let err = write_new_file(dir.path(), "victim.txt", b"evil").unwrap_err();
        assert!(matches!(err, UploadError::NotARegularFile(_)));
        assert_eq!(fs::read(&target).unwrap(), b"original");

        // store_upload picks a fresh name instead of following the link.
        let stored = store_upload(dir.path(), "victim.txt", b"new").unwrap();
        assert_eq!(stored.filename, "victim_1.txt");
        assert_eq!(fs::read(&target).unwrap(), b"original");
        // Deleting through the symlink is refused too, and the message says what happened.
        let refused = delete_upload(dir.path(), "victim.txt").unwrap_err();
        assert_eq!(refused, UploadError::NotDeletable("victim.txt".into()));
        let message = refused.to_string();
        assert!(message.contains("symlink"), "{message}");
        assert!(message.contains("left in place"), "{message}");
        assert!(!message.contains("write"), "{message}");
        assert_eq!(fs::read(&target).unwrap(), b"original");
    }

    #[test]
    fn a_symlinked_uploads_directory_is_refused_without_naming_host_paths() {
        let base = tempfile::tempdir().unwrap();
        let elsewhere = base.path().join("elsewhere");
        fs::create_dir_all(&elsewhere).unwrap();
        let uploads = base.path().join("uploads");
        std::os::unix::fs::symlink(&elsewhere, &uploads).unwrap();
        let refused = store_upload(&uploads, "a.txt", b"x").unwrap_err();
        assert_eq!(refused, UploadError::UnusableDirectory);
        assert!(!refused.to_string().contains(base.path().to_str().unwrap()));
        assert!(fs::read_dir(&elsewhere).unwrap().next().is_none());
    }

    #[test]
    fn list_and_delete_with_converted_sibling() {
        let dir = tempfile::tempdir().unwrap();
        store_upload(dir.path(), "a.pdf", b"%PDF").unwrap();
        store_upload(dir.path(), "a.md", b"# a").unwrap();
        store_upload(dir.path(), "pic.png", b"png").unwrap();
        fs::write(dir.path().join(".upload-123.part"), b"partial").unwrap();
        let listed = list_uploads(dir.path()).unwrap();
        let names: Vec<_> = listed.iter().map(|f| f.filename.as_str()).collect();
        assert_eq!(names, ["a.md", "a.pdf", "pic.png"]);
        assert!(listed[2].is_image);
        assert_eq!(listed[1].path, "/mnt/user-data/uploads/a.pdf");
        assert_eq!(total_size(dir.path()).unwrap(), 3 + 4 + 3);

        delete_upload(dir.path(), "a.pdf").unwrap();
        let names: Vec<_> = list_uploads(dir.path())
            .unwrap()
            .into_iter()
            .map(|f| f.filename)
            .collect();
        assert_eq!(names, ["pic.png"]);
        assert_eq!(
            delete_upload(dir.path(), "missing.txt"),
            Err(UploadError::NotFound("missing.txt".into()))
        );
    }
}
