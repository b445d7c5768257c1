//! Unpacking a `.skill`/`.zip` archive safely into a staging directory.
//!
//! An archive is hostile until proven otherwise: member names are checked before anything is
//! written (absolute, `..`, `:`, outside the destination), symlinks are skipped, executables
//! refused, and the uncompressed size is counted from the bytes actually inflated, never from
//! the headers a zip bomb lies in. The caller validates the unpacked `SKILL.md` and moves the
//! staged directory into place with one rename.

use std::io::{Cursor, Read, Write};
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::skills::SKILL_FILE;
use crate::skills::front_matter::{SkillFormatError, SkillMeta, parse_skill_md};

/// Most members an archive may hold.
pub const MAX_ENTRIES: usize = 4096;
/// Most bytes an archive may inflate to.
pub const MAX_TOTAL_BYTES: u64 = 512 * 1024 * 1024;

/// Why an archive was refused. Nothing is left behind in the destination.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("the upload is not a zip archive ({0}); send a .skill or .zip file")]
    NotAZip(String),
    #[error("the archive has {0} members, more than allowed (4096); remove files it does not need")]
    TooManyEntries(usize),
    #[error(
        "archive member '{0}' has an absolute path; repack it with paths relative to the skill"
    )]
    AbsolutePath(String),
    #[error("archive member '{0}' contains '..'; repack it without parent-directory segments")]
    ParentDir(String),
    #[error(
        "archive member '{0}' contains ':'; rename it (colons are drive letters or alternate data streams)"
    )]
    Colon(String),
    #[error("archive member '{0}' would land outside the skill directory; repack it")]
    OutsideDestination(String),
    #[error(
        "archive member '{0}' is a native executable (ELF, PE or Mach-O); skills may carry scripts, not binaries"
    )]
    Executable(String),
    #[error("the archive inflates to more than allowed (512 MiB); it is too large to be a skill")]
    TooLarge,
    #[error("the archive has no SKILL.md at its root (or in its single top directory); add one")]
    NoSkillFile,
    #[error("the archive's SKILL.md is invalid: {0}")]
    Format(#[from] SkillFormatError),
    #[error("could not unpack the archive: {0}")]
    Io(String),
}

/// A skill unpacked into a staging directory, ready to be moved into place.
#[derive(Debug)]
pub struct Unpacked {
    /// The skill's root inside the staging directory (the single top directory, if any).
    pub root: PathBuf,
    pub meta: SkillMeta,
    /// Hex SHA-256 of the archive bytes.
    pub sha256: String,
}

/// Hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The bounds an archive must stay within.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_entries: usize,
    pub max_total_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_entries: MAX_ENTRIES,
            max_total_bytes: MAX_TOTAL_BYTES,
        }
    }
}

/// Unpacks `archive` into `staging` (which must exist and be empty) and validates its SKILL.md.
pub fn unpack(archive: &[u8], staging: &Path) -> Result<Unpacked, ArchiveError> {
    unpack_with(archive, staging, Limits::default())
}

/// [`unpack`] with explicit bounds (tests use small ones).
pub fn unpack_with(
    archive: &[u8],
    staging: &Path,
    limits: Limits,
) -> Result<Unpacked, ArchiveError> {
    let mut zip = zip::ZipArchive::new(Cursor::new(archive))
        .map_err(|e| ArchiveError::NotAZip(e.to_string()))?;
    if zip.len() > limits.max_entries {
        return Err(ArchiveError::TooManyEntries(zip.len()));
    }
    let mut budget = limits.max_total_bytes;
    for index in 0..zip.len() {
        let mut member = zip
            .by_index(index)
            .map_err(|e| ArchiveError::NotAZip(e.to_string()))?;
        let name = member
            .name()
            .map_err(|e| ArchiveError::NotAZip(e.to_string()))?
            .into_owned();
        let relative = checked_name(&name)?;
        if ignored(&relative) {
            continue;
        }
        // Links could point anywhere on the host once mounted; they are dropped, not followed.
        if member.is_symlink() {
            tracing::info!(member = %name, "Skipping a symlink in a skill archive");
            continue;
        }
        let target = staging.join(&relative);
        if !target.starts_with(staging) {
            return Err(ArchiveError::OutsideDestination(name));
        }
        if member.is_dir() {
            std::fs::create_dir_all(&target).map_err(io)?;
            continue;
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        copy_limited(&mut member, &target, &name, &mut budget)?;
    }
    let root = skill_root(staging)?;
    let text = std::fs::read_to_string(root.join(SKILL_FILE))
        .map_err(|e| ArchiveError::Io(format!("SKILL.md is not readable UTF-8 text: {e}")))?;
    let (meta, _) = parse_skill_md(&text)?;
    Ok(Unpacked {
        root,
        meta,
        sha256: sha256_hex(archive),
    })
}

/// The member's path as relative components, or why it is unsafe.
fn checked_name(name: &str) -> Result<PathBuf, ArchiveError> {
    let unified = name.replace('\\', "/");
    if unified.starts_with('/') || unified.starts_with("//") {
        return Err(ArchiveError::AbsolutePath(name.to_string()));
    }
    // `C:\x` is absolute on Windows; any other colon is an NTFS stream or worse.
    let bytes = unified.as_bytes();
    if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        return Err(ArchiveError::AbsolutePath(name.to_string()));
    }
    if unified.contains(':') {
        return Err(ArchiveError::Colon(name.to_string()));
    }
    let mut relative = PathBuf::new();
    for part in unified.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(ArchiveError::ParentDir(name.to_string())),
            part => relative.push(part),
        }
    }
    if relative
        .components()
        .any(|c| !matches!(c, Component::Normal(_)))
    {
        return Err(ArchiveError::OutsideDestination(name.to_string()));
    }
    Ok(relative)
}

/// macOS resource forks and dotfiles (`.git`, `.DS_Store`) are never part of a skill.
fn ignored(relative: &Path) -> bool {
    relative.components().any(|c| {
        let part = c.as_os_str().to_string_lossy();
        part == "__MACOSX" || part.starts_with('.')
    })
}

/// Inflates one member into `target`, counting real bytes against `budget`, and refuses
/// native executables by their magic number.
fn copy_limited(
    member: &mut impl Read,
    target: &Path,
    name: &str,
    budget: &mut u64,
) -> Result<(), ArchiveError> {
    // The head is read whole first: a decompressor may hand out fewer bytes per read than a
    // magic number is long.
    let mut head = Vec::with_capacity(4096);
    member.take(4096).read_to_end(&mut head).map_err(io)?;
    if is_executable(&head) {
        return Err(ArchiveError::Executable(name.to_string()));
    }
    let mut file = std::fs::File::create(target).map_err(io)?;
    let mut spend = |bytes: usize| -> Result<(), ArchiveError> {
        let bytes = bytes as u64;
        if bytes > *budget {
            return Err(ArchiveError::TooLarge);
        }
        *budget -= bytes;
        Ok(())
    };
    spend(head.len())?;
    file.write_all(&head).map_err(io)?;
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = member.read(&mut buffer).map_err(io)?;
        if read == 0 {
            return Ok(());
        }
        spend(read)?;
        file.write_all(&buffer[..read]).map_err(io)?;
    }
}

/// ELF, PE (`MZ` with a `PE` header where `e_lfanew` points) and the Mach-O magics (32/64-bit,
/// both byte orders, and fat binaries).
fn is_executable(head: &[u8]) -> bool {
    if head.starts_with(b"MZ") && head.len() >= 0x40 {
        let offset = u32::from_le_bytes([head[0x3c], head[0x3d], head[0x3e], head[0x3f]]) as usize;
        if head.get(offset..offset + 4) == Some(b"PE\0\0") {
            return true;
        }
    }
    const MAGICS: &[&[u8]] = &[
        b"\x7fELF",
        &[0xfe, 0xed, 0xfa, 0xce],
        &[0xfe, 0xed, 0xfa, 0xcf],
        &[0xce, 0xfa, 0xed, 0xfe],
        &[0xcf, 0xfa, 0xed, 0xfe],
        &[0xca, 0xfe, 0xba, 0xbe],
    ];
    MAGICS.iter().any(|magic| head.starts_with(magic))
}

/// `staging` itself when it holds SKILL.md, else its single top directory.
fn skill_root(staging: &Path) -> Result<PathBuf, ArchiveError> {
    if staging.join(SKILL_FILE).is_file() {
        return Ok(staging.to_path_buf());
    }
    let entries: Vec<_> = std::fs::read_dir(staging)
        .map_err(io)?
        .flatten()
        .map(|e| e.path())
        .collect();
    match entries.as_slice() {
        [only] if only.is_dir() && only.join(SKILL_FILE).is_file() => Ok(only.clone()),
        _ => Err(ArchiveError::NoSkillFile),
    }
}

fn io(error: std::io::Error) -> ArchiveError {
    ArchiveError::Io(error.to_string())
}

#[cfg(test)]
#[path = "installer_tests.rs"]
mod tests;
