//! Host-side file operations behind the virtual paths (blocking; callers use `spawn_blocking`).
//!
//! Every path goes through [`PathMapper::resolve`] first, and every error names the virtual
//! path, never the host one.

use std::io::{ErrorKind, Write};
use std::path::Path;

use globset::{GlobBuilder, GlobMatcher};
use regex::RegexBuilder;

use crate::sandbox::quota::ThreadQuota;
use crate::sandbox::{PathMapper, ResolvedPath, SandboxError};

/// Directory names skipped by listings and searches (noise the model rarely wants).
const IGNORED_DIRS: &[&str] = &[
    ".git",
    "node_modules",
    "__pycache__",
    ".venv",
    ".mypy_cache",
];
/// Files larger than this are not searched by `grep`.
const GREP_MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;
/// Longest line text returned per grep match.
const GREP_MAX_LINE_CHARS: usize = 500;

#[derive(Clone, Debug, Default)]
pub struct GrepOptions {
    /// Only search files whose name (or path below the search root) matches this glob.
    pub glob: Option<String>,
    /// Treat the pattern as plain text instead of a regular expression.
    pub literal: bool,
    pub case_sensitive: bool,
    pub max_results: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrepMatch {
    /// Virtual path of the file.
    pub path: String,
    /// 1-indexed.
    pub line_number: usize,
    pub line: String,
}

/// Lines `start..=end` (1-indexed) of `text`, with the reference's validation messages.
pub fn slice_lines(
    text: &str,
    start_line: Option<usize>,
    end_line: Option<usize>,
) -> Result<String, SandboxError> {
    if start_line.is_none() && end_line.is_none() {
        return Ok(text.to_string());
    }
    let start = start_line.unwrap_or(1);
    if start < 1 {
        return Err(SandboxError::InvalidArgument(
            "invalid line range (start_line must be >= 1)".into(),
        ));
    }
    if let Some(end) = end_line
        && start > end
    {
        return Err(SandboxError::InvalidArgument(
            "invalid line range (start_line > end_line — no lines in range)".into(),
        ));
    }
    let lines = text.lines().skip(start - 1);
    let selected: Vec<&str> = match end_line {
        Some(end) => lines.take(end - start + 1).collect(),
        None => lines.collect(),
    };
    Ok(selected.join("\n"))
}

pub(crate) fn read_bytes(mapper: &PathMapper, path: &str) -> Result<Vec<u8>, SandboxError> {
    let resolved = mapper.resolve(path)?;
    if resolved.host_path.is_dir() {
        return Err(SandboxError::IsDirectory(resolved.virtual_path));
    }
    std::fs::read(&resolved.host_path).map_err(|e| io_error(mapper, &resolved, &e))
}

pub(crate) fn read_text(
    mapper: &PathMapper,
    path: &str,
    start_line: Option<usize>,
    end_line: Option<usize>,
) -> Result<String, SandboxError> {
    let bytes = read_bytes(mapper, path)?;
    slice_lines(&String::from_utf8_lossy(&bytes), start_line, end_line)
}

/// Writes `content`, first checking the thread's disk quota (when the path counts against it)
/// and booking the size change afterwards.
pub(crate) fn write_bytes(
    mapper: &PathMapper,
    quota: Option<&ThreadQuota>,
    path: &str,
    content: &[u8],
    append: bool,
) -> Result<(), SandboxError> {
    let resolved = writable(mapper, path)?;
    // Resolution checked the path; refusing a symlink here closes the gap where one is
    // planted between that check and the open.
    let existing = std::fs::symlink_metadata(&resolved.host_path).ok();
    if existing
        .as_ref()
        .is_some_and(|m| m.file_type().is_symlink())
    {
        return Err(SandboxError::PathRejected(format!(
            "{} is a symbolic link; write to a regular file instead",
            resolved.virtual_path
        )));
    }
    let quota = quota.filter(|q| q.covers(&resolved.host_path));
    let replaced = match (&existing, append) {
        (Some(meta), false) => meta.len(),
        _ => 0,
    };
    let added = content.len() as u64;
    if let Some(quota) = quota {
        quota.check_write(replaced, added)?;
    }
    if let Some(parent) = resolved.host_path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| io_error(mapper, &resolved, &e))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(&resolved.host_path)
        .map_err(|e| io_error(mapper, &resolved, &e))?;
    let written = file
        .write_all(content)
        .map_err(|e| io_error(mapper, &resolved, &e));
    if let Some(quota) = quota {
        // A failed write may have left part of the content: let the next check walk again.
        match written {
            Ok(()) => quota.record_write(replaced, added),
            Err(_) => quota.mark_stale(),
        }
    }
    written
}

pub(crate) fn list_dir(
    mapper: &PathMapper,
    path: &str,
    max_depth: usize,
) -> Result<Vec<String>, SandboxError> {
    let resolved = existing_dir(mapper, path)?;
    let mut entries = Vec::new();
    let walker = walkdir::WalkDir::new(&resolved.host_path)
        .min_depth(1)
        .max_depth(max_depth.max(1))
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| !is_ignored(e.file_name()));
    for entry in walker.flatten() {
        let Some(virtual_path) = mapper.to_virtual(entry.path()) else {
            continue;
        };
        if entry.file_type().is_dir() {
            entries.push(format!("{virtual_path}/"));
        } else {
            entries.push(virtual_path);
        }
    }
    Ok(entries)
}

pub(crate) fn glob(
    mapper: &PathMapper,
    path: &str,
    pattern: &str,
    include_dirs: bool,
    max_results: usize,
) -> Result<(Vec<String>, bool), SandboxError> {
    let resolved = existing_dir(mapper, path)?;
    let matcher = compile_glob(pattern)?;
    let mut results = Vec::new();
    let walker = walkdir::WalkDir::new(&resolved.host_path)
        .min_depth(1)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| !is_ignored(e.file_name()));
    for entry in walker.flatten() {
        if entry.file_type().is_dir() && !include_dirs {
            continue;
        }
        let Ok(relative) = entry.path().strip_prefix(&resolved.host_path) else {
            continue;
        };
        if !matcher.is_match(relative) {
            continue;
        }
        if results.len() >= max_results {
            return Ok((results, true));
        }
        if let Some(virtual_path) = mapper.to_virtual(entry.path()) {
            results.push(virtual_path);
        }
    }
    Ok((results, false))
}

pub(crate) fn grep(
    mapper: &PathMapper,
    path: &str,
    pattern: &str,
    options: &GrepOptions,
) -> Result<(Vec<GrepMatch>, bool), SandboxError> {
    let resolved = mapper.resolve(path)?;
    let source = if options.literal {
        regex::escape(pattern)
    } else {
        pattern.to_string()
    };
    let regex = RegexBuilder::new(&source)
        .case_insensitive(!options.case_sensitive)
        .build()
        .map_err(|e| {
            SandboxError::InvalidArgument(format!(
                "invalid regular expression: {e}; pass literal=true to search for plain text"
            ))
        })?;
    let file_filter = options.glob.as_deref().map(compile_glob).transpose()?;
    if !resolved.host_path.exists() {
        return Err(SandboxError::FileNotFound(resolved.virtual_path));
    }
    let mut matches = Vec::new();
    let walker = walkdir::WalkDir::new(&resolved.host_path)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| !is_ignored(e.file_name()));
    for entry in walker.flatten() {
        if !entry.file_type().is_file() {
            continue;
        }
        if let Some(filter) = &file_filter {
            let relative = entry
                .path()
                .strip_prefix(&resolved.host_path)
                .unwrap_or(entry.path());
            let name_matches = Path::new(entry.file_name());
            if !filter.is_match(relative) && !filter.is_match(name_matches) {
                continue;
            }
        }
        if entry.metadata().map(|m| m.len()).unwrap_or(0) > GREP_MAX_FILE_BYTES {
            continue;
        }
        let Ok(bytes) = std::fs::read(entry.path()) else {
            continue;
        };
        if bytes.iter().take(8192).any(|b| *b == 0) {
            continue;
        }
        let Some(virtual_path) = mapper.to_virtual(entry.path()) else {
            continue;
        };
        for (index, line) in String::from_utf8_lossy(&bytes).lines().enumerate() {
            if !regex.is_match(line) {
                continue;
            }
            if matches.len() >= options.max_results {
                return Ok((matches, true));
            }
            matches.push(GrepMatch {
                path: virtual_path.clone(),
                line_number: index + 1,
                line: line.chars().take(GREP_MAX_LINE_CHARS).collect(),
            });
        }
    }
    Ok((matches, false))
}

fn writable(mapper: &PathMapper, path: &str) -> Result<ResolvedPath, SandboxError> {
    let resolved = mapper.resolve(path)?;
    if resolved.read_only {
        return Err(SandboxError::ReadOnly(resolved.virtual_path));
    }
    if resolved.host_path.is_dir() {
        return Err(SandboxError::IsDirectory(resolved.virtual_path));
    }
    Ok(resolved)
}

fn existing_dir(mapper: &PathMapper, path: &str) -> Result<ResolvedPath, SandboxError> {
    let resolved = mapper.resolve(path)?;
    if !resolved.host_path.exists() {
        return Err(SandboxError::FileNotFound(resolved.virtual_path));
    }
    if !resolved.host_path.is_dir() {
        return Err(SandboxError::NotDirectory(resolved.virtual_path));
    }
    Ok(resolved)
}

fn compile_glob(pattern: &str) -> Result<GlobMatcher, SandboxError> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| {
            SandboxError::InvalidArgument(format!(
                "invalid glob pattern {pattern:?}: {e}; use patterns like **/*.py"
            ))
        })
}

fn is_ignored(name: &std::ffi::OsStr) -> bool {
    name.to_str().is_some_and(|n| IGNORED_DIRS.contains(&n))
}

fn io_error(mapper: &PathMapper, resolved: &ResolvedPath, error: &std::io::Error) -> SandboxError {
    let path = resolved.virtual_path.clone();
    match error.kind() {
        ErrorKind::NotFound => SandboxError::FileNotFound(path),
        ErrorKind::PermissionDenied => SandboxError::PermissionDenied(path),
        _ => SandboxError::Io {
            path,
            message: mapper.unmap_text(&error.to_string()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::ThreadPaths;

    fn setup() -> (tempfile::TempDir, PathMapper) {
        let tmp = tempfile::tempdir().unwrap();
        let paths = ThreadPaths::new(tmp.path(), "u", "t").unwrap();
        paths.ensure_dirs().unwrap();
        let mapper = PathMapper::for_thread(&paths, None, &[]);
        (tmp, mapper)
    }

    #[test]
    fn slices_lines_with_reference_messages() {
        let text = "a\nb\nc\nd";
        assert_eq!(slice_lines(text, Some(2), Some(3)).unwrap(), "b\nc");
        assert_eq!(slice_lines(text, Some(3), None).unwrap(), "c\nd");
        assert_eq!(slice_lines(text, None, Some(1)).unwrap(), "a");
        assert_eq!(slice_lines(text, Some(9), None).unwrap(), "");
        let zero = slice_lines(text, Some(0), None).unwrap_err().to_string();
        assert!(zero.contains("(start_line must be >= 1)"), "{zero}");
        let reversed = slice_lines(text, Some(3), Some(2)).unwrap_err().to_string();
        assert!(reversed.contains("(start_line > end_line — no lines in range)"));
    }

    #[test]
    fn writes_lists_globs_and_greps_with_virtual_paths() {
        let (_tmp, m) = setup();
        write_bytes(
            &m,
            None,
            "/mnt/user-data/workspace/src/a.py",
            b"print('Hi')\n",
            false,
        )
        .unwrap();
        write_bytes(
            &m,
            None,
            "/mnt/user-data/workspace/src/a.py",
            b"hi again\n",
            true,
        )
        .unwrap();
        write_bytes(
            &m,
            None,
            "/mnt/user-data/workspace/b.txt",
            b"nothing",
            false,
        )
        .unwrap();
        assert_eq!(
            read_text(&m, "/mnt/user-data/workspace/src/a.py", None, None).unwrap(),
            "print('Hi')\nhi again\n"
        );
        let listing = list_dir(&m, "/mnt/user-data/workspace", 2).unwrap();
        assert_eq!(
            listing,
            [
                "/mnt/user-data/workspace/b.txt",
                "/mnt/user-data/workspace/src/",
                "/mnt/user-data/workspace/src/a.py"
            ]
        );
        let (found, truncated) =
            glob(&m, "/mnt/user-data/workspace", "**/*.py", false, 10).unwrap();
        assert_eq!(found, ["/mnt/user-data/workspace/src/a.py"]);
        assert!(!truncated);
        let options = GrepOptions {
            max_results: 1,
            ..Default::default()
        };
        let (hits, truncated) = grep(&m, "/mnt/user-data/workspace", "HI", &options).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].line_number, 1);
        assert!(truncated, "two lines match, one was asked for");
        let err = read_text(&m, "/mnt/user-data/workspace/missing", None, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "File not found: /mnt/user-data/workspace/missing"
        );
    }
}
