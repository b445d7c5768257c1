use std::io::{Cursor, Write};

use zip::write::SimpleFileOptions;

use super::*;

const SKILL_MD: &str = "---\nname: demo\ndescription: A demo skill.\n---\n# Demo\n";

/// A zip of `(name, bytes)` members, deflated.
fn archive(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default();
    for (name, bytes) in members {
        if name.ends_with('/') {
            writer.add_directory(*name, options).unwrap();
        } else {
            writer.start_file(*name, options).unwrap();
            writer.write_all(bytes).unwrap();
        }
    }
    writer.finish().unwrap().into_inner()
}

fn unpack_into(bytes: &[u8]) -> (tempfile::TempDir, Result<Unpacked, ArchiveError>) {
    let staging = tempfile::tempdir().unwrap();
    let result = unpack(bytes, staging.path());
    (staging, result)
}

#[test]
fn a_single_top_directory_becomes_the_root() {
    let bytes = archive(&[
        ("demo/", b""),
        ("demo/SKILL.md", SKILL_MD.as_bytes()),
        ("demo/references/guide.md", b"# guide"),
        ("__MACOSX/demo/._SKILL.md", b"junk"),
        ("demo/.DS_Store", b"junk"),
    ]);
    let (staging, result) = unpack_into(&bytes);
    let unpacked = result.unwrap();
    assert_eq!(unpacked.root, staging.path().join("demo"));
    assert_eq!(unpacked.meta.name, "demo");
    assert_eq!(unpacked.sha256, sha256_hex(&bytes));
    assert_eq!(unpacked.sha256.len(), 64);
    assert!(unpacked.root.join("references/guide.md").is_file());
    assert!(!staging.path().join("__MACOSX").exists());
    assert!(!unpacked.root.join(".DS_Store").exists());
}

#[test]
fn zip_slip_is_refused() {
    let bytes = archive(&[
        ("SKILL.md", SKILL_MD.as_bytes()),
        ("../../evil.sh", b"echo"),
    ]);
    let (staging, result) = unpack_into(&bytes);
    let error = result.unwrap_err();
    assert!(matches!(error, ArchiveError::ParentDir(ref n) if n == "../../evil.sh"));
    assert!(error.to_string().contains("contains '..'"));
    assert!(!staging.path().parent().unwrap().join("evil.sh").exists());
}

#[test]
fn absolute_paths_are_refused() {
    for name in [
        "/etc/cron.d/evil",
        "C:\\Windows\\evil.bat",
        "\\\\server\\share\\x",
    ] {
        let bytes = archive(&[("SKILL.md", SKILL_MD.as_bytes()), (name, b"x")]);
        let (_staging, result) = unpack_into(&bytes);
        let error = result.unwrap_err();
        assert!(
            matches!(error, ArchiveError::AbsolutePath(_)),
            "{name}: {error}"
        );
        assert!(error.to_string().contains("absolute path"));
    }
}

#[test]
fn colons_are_refused() {
    let bytes = archive(&[
        ("SKILL.md", SKILL_MD.as_bytes()),
        ("notes.txt:hidden", b"x"),
    ]);
    let (_staging, result) = unpack_into(&bytes);
    assert!(matches!(result.unwrap_err(), ArchiveError::Colon(n) if n == "notes.txt:hidden"));
}

#[test]
fn symlinks_are_skipped() {
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default();
    writer.start_file("SKILL.md", options).unwrap();
    writer.write_all(SKILL_MD.as_bytes()).unwrap();
    writer
        .add_symlink("passwd", "/etc/passwd", options)
        .unwrap();
    let bytes = writer.finish().unwrap().into_inner();
    let (staging, result) = unpack_into(&bytes);
    result.unwrap();
    assert!(staging.path().join("SKILL.md").is_file());
    assert!(std::fs::symlink_metadata(staging.path().join("passwd")).is_err());
}

#[test]
fn executables_are_refused() {
    let mut pe = vec![0u8; 0x80];
    pe[..2].copy_from_slice(b"MZ");
    pe[0x3c] = 0x40;
    pe[0x40..0x44].copy_from_slice(b"PE\0\0");
    let binaries: [(&str, Vec<u8>); 3] = [
        ("scripts/tool", b"\x7fELF\x02\x01\x01rest".to_vec()),
        ("scripts/tool.exe", pe),
        ("scripts/tool-mac", vec![0xcf, 0xfa, 0xed, 0xfe, 7, 0, 0, 1]),
    ];
    for (name, bytes) in binaries {
        let zip = archive(&[("SKILL.md", SKILL_MD.as_bytes()), (name, &bytes)]);
        let (staging, result) = unpack_into(&zip);
        let error = result.unwrap_err();
        assert!(
            matches!(error, ArchiveError::Executable(ref n) if n == name),
            "{error}"
        );
        assert!(!staging.path().join(name).exists());
    }
    // A script, or text that merely starts with "MZ", is fine.
    let zip = archive(&[
        ("SKILL.md", SKILL_MD.as_bytes()),
        ("scripts/run.sh", b"#!/bin/sh\necho hi\n"),
        ("notes.md", b"MZ is a monogram"),
    ]);
    unpack_into(&zip).1.unwrap();
}

#[test]
fn too_many_entries_are_refused() {
    let names: Vec<String> = (0..=MAX_ENTRIES).map(|i| format!("f{i}.txt")).collect();
    let mut members: Vec<(&str, &[u8])> = vec![("SKILL.md", SKILL_MD.as_bytes())];
    members.extend(names.iter().map(|n| (n.as_str(), &b"x"[..])));
    let (staging, result) = unpack_into(&archive(&members));
    let error = result.unwrap_err();
    assert!(
        matches!(error, ArchiveError::TooManyEntries(4098)),
        "{error}"
    );
    // Refused before anything was written.
    assert_eq!(std::fs::read_dir(staging.path()).unwrap().count(), 0);
}

#[test]
fn a_zip_bomb_is_stopped_by_the_bytes_inflated() {
    // 4 MiB of zeros deflate to a few KiB; the bound is counted while inflating.
    let zeros = vec![0u8; 4 * 1024 * 1024];
    let bytes = archive(&[("SKILL.md", SKILL_MD.as_bytes()), ("bomb.bin", &zeros)]);
    assert!(bytes.len() < 64 * 1024);
    let staging = tempfile::tempdir().unwrap();
    let limits = Limits {
        max_entries: MAX_ENTRIES,
        max_total_bytes: 1024 * 1024,
    };
    let error = unpack_with(&bytes, staging.path(), limits).unwrap_err();
    assert!(matches!(error, ArchiveError::TooLarge), "{error}");
    assert_eq!(MAX_TOTAL_BYTES, 512 * 1024 * 1024);
}

#[test]
fn an_archive_without_a_valid_skill_md_is_refused() {
    let (_s, result) = unpack_into(&archive(&[("readme.md", b"# hi")]));
    assert!(matches!(result.unwrap_err(), ArchiveError::NoSkillFile));
    let (_s, result) = unpack_into(&archive(&[(
        "x/SKILL.md",
        b"---\nname: Bad_Name\ndescription: x\n---\n",
    )]));
    let error = result.unwrap_err();
    assert!(error.to_string().contains("must be hyphen-case"), "{error}");
    let (_s, result) = unpack_into(b"not a zip");
    assert!(matches!(result.unwrap_err(), ArchiveError::NotAZip(_)));
}
