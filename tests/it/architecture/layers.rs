//! The layers of the `antler` crate: every top-level module of `src/` belongs to one layer, and a
//! module imports (`crate::…`) only from its own layer or a lower one. Cargo enforces the layers
//! below the crate (`antler-store`, `antler-convert`, `antler-process`, the adapters); this
//! test enforces them inside it.
//!
//! To add a module, put it in its layer in [`LAYERS`]; to rename one, rename it there. An
//! import against the layers is a design question, not a line to add to [`KNOWN_VIOLATIONS`]:
//! that list only holds today's, each on its way out, and the test fails when one is gone so
//! the list only shrinks.

use std::collections::BTreeMap;
use std::path::Path;

use super::{SourceFile, names_after, read_sources};

/// The layers, lowest first, and their modules.
const LAYERS: &[(&str, &[&str])] = &[
    // Leaves everything may use: no config, no agents.
    ("primitives", &["paths", "metrics", "body_buffers"]),
    // The typed config tree and what reads nothing but it.
    ("config", &["config", "identity"]),
    // Services built from the config alone: the model, the sandbox, a thread's files.
    (
        "services",
        &[
            "model",
            "sandbox",
            "files",
            "storage",
            "cluster",
            "voice",
            "telemetry",
        ],
    ),
    // The agent contracts the loop, the middlewares and the tools share.
    ("contracts", &["agent_api"]),
    // Domains the agents use: memory, usage, skills.
    (
        "domains",
        &[
            "memory",
            "usage",
            "skills",
            "approvals",
            "scheduler",
            "api_runs",
        ],
    ),
    // What an agent is made of.
    ("agent parts", &["tools", "mcp", "middleware"]),
    // Agents: the loop, custom agents, sub-agents, the app-level factory.
    (
        "agents",
        &["agent", "custom_agents", "subagents", "lead_agent"],
    ),
    // Runs on threads and the surfaces that start them.
    (
        "runtime",
        &[
            "harness", "client", "users", "commands", "channels", "hooks", "http",
        ],
    ),
    // The daemon process around the runtime: listeners, socket, service manager, heap trim.
    ("daemon", &["daemon"]),
    // Commands of the `antler` binary.
    ("cli", &["cli"]),
];

/// Imports against the layers that exist today, (from, to, why it is to go).
const KNOWN_VIOLATIONS: &[(&str, &str, &str)] = &[];

#[test]
fn src_modules_keep_to_their_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = read_sources(&root);
    let problems = check(&files, LAYERS, KNOWN_VIOLATIONS);
    assert!(
        problems.is_empty(),
        "the layering of src/ (tests/it/architecture/layers.rs):\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_checker_names_the_file_and_the_import() {
    let file = |path: &str, text: &str| SourceFile {
        path: path.into(),
        module: path
            .trim_end_matches(".rs")
            .split('/')
            .map(String::from)
            .collect(),
        text: text.into(),
    };
    let layers: &[(&str, &[&str])] = &[("low", &["base"]), ("high", &["app", "web"])];
    let files = [
        file("base.rs", "use crate::web::Page;\n"),
        file("app/run.rs", "use crate::{base::Thing, web};\n"),
        file("web.rs", ""),
        file("extra.rs", ""),
    ];
    assert_eq!(
        check(&files, layers, &[]),
        [
            "extra: a module in no layer (add it to LAYERS)",
            "src/base.rs: `crate::web` (base is in layer low, web in the higher layer high)",
        ]
    );
    assert_eq!(
        check(&files[..2], layers, &[("base", "web", "why")]),
        ["web: in LAYERS but not a module of src/ (renamed? rename it there)"]
    );
    // A known violation passes; one that no longer happens is reported, so the list shrinks.
    assert_eq!(
        check(
            &files[..3],
            layers,
            &[("base", "web", "why"), ("app", "base", "why")]
        ),
        ["app -> base is in KNOWN_VIOLATIONS but no longer happens: remove it"]
    );
}

/// Every import against the layers not in `known`, every module in no layer, every layer entry
/// that is not a module, and every known violation that no longer happens.
fn check(
    files: &[SourceFile],
    layers: &[(&str, &[&str])],
    known: &[(&str, &str, &str)],
) -> Vec<String> {
    let layer_of: BTreeMap<&str, (usize, &str)> = layers
        .iter()
        .enumerate()
        .flat_map(|(rank, (layer, modules))| modules.iter().map(move |m| (*m, (rank, *layer))))
        .collect();
    let mut problems = Vec::new();
    let mut modules: Vec<&str> = files
        .iter()
        .filter_map(|f| f.module.first().map(String::as_str))
        .collect();
    modules.sort_unstable();
    modules.dedup();
    for module in &modules {
        if !layer_of.contains_key(module) {
            problems.push(format!("{module}: a module in no layer (add it to LAYERS)"));
        }
    }
    for listed in layer_of.keys() {
        if !modules.contains(listed) {
            problems.push(format!(
                "{listed}: in LAYERS but not a module of src/ (renamed? rename it there)"
            ));
        }
    }
    let mut seen = Vec::new();
    for file in files {
        let Some(from) = file.module.first() else {
            continue;
        };
        let Some(&(from_rank, from_layer)) = layer_of.get(from.as_str()) else {
            continue;
        };
        let mut targets = names_after(&file.text, "crate::");
        targets.sort_unstable();
        targets.dedup();
        for to in targets {
            let Some(&(to_rank, to_layer)) = layer_of.get(to.as_str()) else {
                continue;
            };
            if to_rank <= from_rank {
                continue;
            }
            if known.iter().any(|(f, t, _)| f == from && *t == to) {
                seen.push((from.clone(), to));
                continue;
            }
            problems.push(format!(
                "src/{}: `crate::{to}` ({from} is in layer {from_layer}, {to} in the higher layer \
                 {to_layer})",
                file.path
            ));
        }
    }
    for (from, to, _) in known {
        if !seen.iter().any(|(f, t)| f == from && t == to) {
            problems.push(format!(
                "{from} -> {to} is in KNOWN_VIOLATIONS but no longer happens: remove it"
            ));
        }
    }
    problems
}
