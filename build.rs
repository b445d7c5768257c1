//! Link-time settings of the `antler` binary, and the public skills it ships.
//!
//! Shipped skills: every file under `skills/public` becomes an `include_bytes!` entry of
//! `$OUT_DIR/bundled_skills.rs` (read by `src/skills/bundled.rs`), so the binary carries them
//! and `antler run` behaves the same from any directory. `include_bytes!` makes rustc rebuild
//! when a file changes; `rerun-if-changed` on the directory catches added or removed ones.
//!
//! Packed relocations: the binary's ~60,000 relative relocations took 1.3 MB of `.rela.dyn`,
//! read at every start and kept resident (file-backed RSS). Packed relative relocations
//! (DT_RELR: glibc 2.36+, GNU ld 2.38+, lld) store them in a few KiB. The executable stays
//! position-independent, so ASLR is unchanged. An older glibc's loader cannot read them, so
//! they are packed only when the build machine's glibc is 2.36 or newer (`getconf`): the binary
//! `cargo run` builds runs where it was built, and the Dockerfile builds on the glibc it ships.
//!
//! Symbol order: an idle daemon had 12 MB of its 28 MB of `.text` resident although the
//! functions it ran add up to ~2 MB: they were spread over the whole section, and the kernel
//! maps 64 KiB around each page it faults in. `link/symbol-order.txt` (made by
//! `link/symbol-order.sh`) lists those functions, and lld places them first, together. Only
//! where the linker is known to be lld: rustc's default for x86_64 Linux since 1.90, unless the
//! build names another linker. Names missing from a build (code changed since) are skipped.
//! The names carry a hash that depends on the rustc version, so another rustc than the one the
//! list was made with (its first line) gets a warning and the linker's default order.

use std::process::Command;

const SYMBOL_ORDER: &str = "link/symbol-order.txt";
const PUBLIC_SKILLS: &str = "skills/public";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    bundle_skills();
    println!("cargo:rerun-if-changed={SYMBOL_ORDER}");
    for var in ["RUSTC_LINKER", "CARGO_ENCODED_RUSTFLAGS"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" && host_glibc_reads_relr() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    let rustc = rustc_version();
    if !links_with_rust_lld(&rustc) {
        return;
    }
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let order = std::path::Path::new(&dir).join(SYMBOL_ORDER);
    let Ok(list) = std::fs::read_to_string(&order) else {
        return;
    };
    let made_with = list.lines().next().and_then(|l| l.strip_prefix("# "));
    if made_with != Some(rustc.as_str()) {
        println!(
            "cargo:warning={SYMBOL_ORDER} was made with {}, this is {rustc}: the binary links in \
             the default order (idles ~11 MiB higher) until link/symbol-order.sh is rerun",
            made_with.unwrap_or("an unknown rustc")
        );
        return;
    }
    // The linker reads a copy in OUT_DIR: a target directory shared by several checkouts (CI
    // clones reusing a warm build) may reuse this script's output after the checkout it named
    // is gone, and OUT_DIR lives as long as that output.
    let out = std::path::Path::new(&std::env::var("OUT_DIR").unwrap_or_default())
        .join("symbol-order.txt");
    if std::fs::write(&out, &list).is_err() {
        return;
    }
    println!(
        "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
        out.display()
    );
    println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
}

/// Writes `$OUT_DIR/bundled_skills.rs`: a slice of `(relative path, bytes, executable)`, sorted
/// by path. Hidden files and directories (editor and VCS leftovers) are left out.
fn bundle_skills() {
    println!("cargo:rerun-if-changed={PUBLIC_SKILLS}");
    let dir = std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default())
        .join(PUBLIC_SKILLS);
    let mut files = Vec::new();
    collect_files(&dir, &dir, &mut files);
    files.sort();
    let mut code = String::from("&[\n");
    // Paths are spelled from the crate's directory at compile time, not this script's: a
    // target directory shared by several checkouts (CI clones reusing a warm build) may reuse
    // this output after the checkout it ran in is gone.
    for (relative, _, executable) in &files {
        let within = format!("/{PUBLIC_SKILLS}/{relative}");
        code.push_str(&format!(
            "    ({relative:?}, include_bytes!(concat!(env!(\"CARGO_MANIFEST_DIR\"), {within:?})), {executable}),\n"
        ));
    }
    code.push_str("]\n");
    let out = std::path::Path::new(&std::env::var("OUT_DIR").unwrap_or_default())
        .join("bundled_skills.rs");
    if let Err(error) = std::fs::write(&out, code) {
        panic!("cannot write {}: {error}", out.display());
    }
}

fn collect_files(
    root: &std::path::Path,
    dir: &std::path::Path,
    out: &mut Vec<(String, String, bool)>,
) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        if meta.is_dir() {
            collect_files(root, &path, out);
        } else if meta.is_file() {
            let relative = path.strip_prefix(root).unwrap_or(&path);
            out.push((
                relative.to_string_lossy().into_owned(),
                path.to_string_lossy().into_owned(),
                meta.permissions().mode() & 0o111 != 0,
            ));
        }
    }
}

/// Whether this is a native build on glibc 2.36 or newer (`getconf GNU_LIBC_VERSION` prints e.g.
/// `glibc 2.36`); false when it cannot tell, which only costs the packing.
fn host_glibc_reads_relr() -> bool {
    if std::env::var("HOST").ok() != std::env::var("TARGET").ok() {
        return false;
    }
    let Ok(out) = Command::new("getconf").arg("GNU_LIBC_VERSION").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut parts = text
        .trim()
        .strip_prefix("glibc ")
        .unwrap_or_default()
        .split('.')
        .map(|part| part.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (2, 36)
}

/// `rustc -V`, e.g. `rustc 1.95.0 (59807616e 2026-04-14)`; empty when it cannot be run.
fn rustc_version() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    Command::new(rustc)
        .arg("-V")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .unwrap_or_default()
}

/// Whether rustc links this build with its own lld: x86_64 Linux (glibc) from rustc 1.90 on,
/// when neither a linker nor linker features are configured for it.
fn links_with_rust_lld(rustc: &str) -> bool {
    if std::env::var("TARGET").as_deref() != Ok("x86_64-unknown-linux-gnu") {
        return false;
    }
    if std::env::var_os("RUSTC_LINKER").is_some() {
        return false;
    }
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    if flags.contains("linker") || flags.contains("fuse-ld") {
        return false;
    }
    let minor = rustc
        .strip_prefix("rustc 1.")
        .and_then(|rest| rest.split('.').next())
        .and_then(|minor| minor.parse::<u32>().ok());
    minor.is_some_and(|minor| minor >= 90)
}
