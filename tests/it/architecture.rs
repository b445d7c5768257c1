//! The module map stays a graph without cycles: `src/`'s top-level modules, and the children of
//! every directory module among themselves; and the top-level modules keep to their layers
//! ([`layers`]).
//!
//! A cycle is where a change in one module forces reading (and often changing) the other; the
//! agent contracts live in `agent_api` precisely so the loop, the middlewares and the tools do not
//! import each other. This test reads the sources, so it catches a new cycle the day it appears.

mod layers;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module by its path below the crate root (`["config", "load"]`).
type ModulePath = Vec<String>;

struct SourceFile {
    /// The file below `src/` (`config/load.rs`), for messages.
    path: String,
    module: ModulePath,
    text: String,
}

#[test]
fn src_modules_have_no_cycles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = read_sources(&root);
    let mut problems = Vec::new();
    for parent in directory_modules(&files) {
        let graph = sibling_graph(&files, &parent);
        if let Some(cycle) = find_cycle(&graph) {
            let at = if parent.is_empty() {
                "src/".to_string()
            } else {
                format!("src/{}/", parent.join("/"))
            };
            problems.push(format!("{at}: {}", cycle.join(" -> ")));
        }
    }
    assert!(
        problems.is_empty(),
        "module cycles (move the shared contract into a leaf module both can depend on):\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_checker_finds_a_cycle() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(from, to)| (from.into(), to.into_iter().map(String::from).collect()))
    .collect();
    let cycle = find_cycle(&graph).expect("a cycle");
    assert_eq!(cycle, ["a", "b", "c", "a"]);
    let acyclic: BTreeMap<String, BTreeSet<String>> = [("a", vec!["b"]), ("b", vec![])]
        .into_iter()
        .map(|(from, to)| (from.into(), to.into_iter().map(String::from).collect()))
        .collect();
    assert_eq!(find_cycle(&acyclic), None);
}

/// The model-call chain skips a middleware that answers `wraps_model_call() == false`, so one
/// that says so and still overrides `wrap_model_call` would silently never run its wrapper.
#[test]
fn middlewares_that_skip_the_model_call_chain_do_not_wrap_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut checked = 0;
    let mut problems = Vec::new();
    for file in read_sources(&root) {
        for block in file.text.split("impl Middleware for ").skip(1) {
            // The impl block ends at the first line that closes an item at column 0.
            let block = block.split("\n}\n").next().unwrap_or(block);
            let name = block.split_whitespace().next().unwrap_or("?");
            let says_no = block.contains("fn wraps_model_call(&self) -> bool {\n        false");
            if says_no {
                checked += 1;
                if block.contains("fn wrap_model_call(") {
                    problems.push(format!("{name} in src/{}", file.module.join("/")));
                }
            }
        }
    }
    assert!(
        checked >= 10,
        "found only {checked} middlewares that skip the chain; did the pattern change?"
    );
    assert!(
        problems.is_empty(),
        "these override wrap_model_call but answer wraps_model_call() == false, so the chain \
         never calls them (answer true):\n{}",
        problems.join("\n")
    );
}

fn read_sources(root: &Path) -> Vec<SourceFile> {
    let mut files = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("read src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(root).expect("under src");
                if let Some(module) = module_of(relative) {
                    let text = std::fs::read_to_string(&path).expect("read source");
                    let path = relative.to_string_lossy().into_owned();
                    files.push(SourceFile { path, module, text });
                }
            }
        }
    }
    files
}

/// `config/load.rs` → `[config, load]`; `mod.rs` and `lib.rs` name their directory; a test file
/// (`run_tests.rs`, `tests.rs`) belongs to the module it tests. The binary is not a module.
fn module_of(relative: &Path) -> Option<ModulePath> {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let file = parts.pop()?;
    let stem = file.strip_suffix(".rs")?;
    match stem {
        "main" if parts.is_empty() => return None,
        "lib" | "mod" | "tests" => {}
        _ => parts.push(stem.strip_suffix("_tests").unwrap_or(stem).to_string()),
    }
    Some(parts)
}

/// Every module that has children (the crate root included).
fn directory_modules(files: &[SourceFile]) -> BTreeSet<ModulePath> {
    files
        .iter()
        .filter(|f| !f.module.is_empty())
        .map(|f| f.module[..f.module.len() - 1].to_vec())
        .collect()
}

/// Edges between the children of `parent`: a file inside child `a` naming `crate::…::b` (or an
/// item `parent` re-exports from `b`) depends on `b`.
fn sibling_graph(files: &[SourceFile], parent: &[String]) -> BTreeMap<String, BTreeSet<String>> {
    let children: BTreeSet<String> = files
        .iter()
        .filter(|f| f.module.len() > parent.len() && f.module.starts_with(parent))
        .map(|f| f.module[parent.len()].clone())
        .collect();
    let reexports = reexports_of(files, parent, &children);
    let prefix: String = std::iter::once("crate")
        .chain(parent.iter().map(String::as_str))
        .map(|s| format!("{s}::"))
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = children
        .iter()
        .map(|c| (c.clone(), BTreeSet::new()))
        .collect();
    for file in files
        .iter()
        .filter(|f| f.module.len() > parent.len() && f.module.starts_with(parent))
    {
        let from = &file.module[parent.len()];
        for name in names_after(&file.text, &prefix) {
            let target = if children.contains(&name) {
                Some(&name)
            } else {
                reexports.get(&name)
            };
            if let Some(target) = target.filter(|t| *t != from)
                && let Some(edges) = graph.get_mut(from)
            {
                edges.insert(target.clone());
            }
        }
    }
    graph
}

/// The identifiers (or `{…}` groups' identifiers) right after each occurrence of `prefix`.
fn names_after(text: &str, prefix: &str) -> Vec<String> {
    let mut names = Vec::new();
    for (at, _) in text.match_indices(prefix) {
        let boundary = text[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':'));
        if !boundary {
            continue;
        }
        let rest = &text[at + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let inner = group.split('}').next().unwrap_or("");
            names.extend(
                inner
                    .split(',')
                    .map(|item| identifier(item.trim()))
                    .filter(|n| !n.is_empty()),
            );
        } else {
            names.push(identifier(rest));
        }
    }
    names
}

fn identifier(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// Names the parent module re-exports, mapped to the child that defines them.
fn reexports_of(
    files: &[SourceFile],
    parent: &[String],
    children: &BTreeSet<String>,
) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let Some(parent_file) = files.iter().find(|f| f.module == parent) else {
        return map;
    };
    for child in children {
        for name in names_after(&parent_file.text, &format!("pub use {child}::")) {
            if name.is_empty() {
                // `pub use child::*`: every public item of the child.
                for file in files.iter().filter(|f| f.module.len() == parent.len() + 1) {
                    if file.module[parent.len()] == *child {
                        for item in public_items(&file.text) {
                            map.insert(item, child.clone());
                        }
                    }
                }
            } else {
                map.insert(name, child.clone());
            }
        }
    }
    map
}

fn public_items(text: &str) -> Vec<String> {
    const KINDS: [&str; 6] = ["struct ", "enum ", "fn ", "const ", "type ", "trait "];
    text.lines()
        .filter_map(|line| line.strip_prefix("pub "))
        .filter_map(|rest| {
            KINDS
                .iter()
                .find_map(|kind| rest.strip_prefix(kind))
                .map(identifier)
        })
        .collect()
}

/// The first cycle found by depth-first search, as `a -> b -> … -> a`.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        marks: &mut BTreeMap<String, Mark>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        marks.insert(node.to_string(), Mark::Open);
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            match marks.get(next) {
                Some(Mark::Open) => {
                    let start = stack.iter().position(|n| n == next).unwrap_or(0);
                    let mut cycle = stack[start..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Some(Mark::Done) => {}
                None => {
                    if let Some(cycle) = visit(next, graph, marks, stack) {
                        return Some(cycle);
                    }
                }
            }
        }
        stack.pop();
        marks.insert(node.to_string(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for node in graph.keys() {
        if !marks.contains_key(node) {
            let mut stack = Vec::new();
            if let Some(cycle) = visit(node, graph, &mut marks, &mut stack) {
                return Some(cycle);
            }
        }
    }
    None
}
