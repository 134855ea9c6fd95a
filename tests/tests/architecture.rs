//! The architecture chapter's map is the code's: each crate's layer in its table, the depth it
//! states and its longest chain are what `scripts/crate-layers` computes from `cargo metadata`, and
//! the stack stays at most six layers deep with the device side (`npugate-android`) below the judge;
//! the folders the README's and the chapter's tree and table name for each crate are where its
//! manifest is.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ lives in the repository").to_path_buf()
}

/// What `scripts/crate-layers` prints: each crate's layer, the depth and the longest chain.
struct Layers {
    layer_of: BTreeMap<String, usize>,
    depth: usize,
    chain: String,
}

fn crate_layers() -> Layers {
    let out = Command::new("python3").arg(repo().join("scripts/crate-layers")).current_dir(repo()).output().unwrap();
    assert!(out.status.success(), "scripts/crate-layers: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut layers = Layers { layer_of: BTreeMap::new(), depth: 0, chain: String::new() };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("layer ") {
            let (number, names) = rest.split_once(": ").unwrap();
            for name in names.split_whitespace() {
                layers.layer_of.insert(name.to_string(), number.parse().unwrap());
            }
        } else if let Some(depth) = line.strip_prefix("depth: ") {
            layers.depth = depth.parse().unwrap();
        } else if let Some(chain) = line.strip_prefix("longest chain: ") {
            layers.chain = chain.to_string();
        }
    }
    layers
}

/// The chapter's crate table: `| `name` | `folder/` | layer | purpose |` rows with a numbered layer.
fn table_layers(chapter: &str) -> BTreeMap<String, usize> {
    chapter
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let name = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            let layer = cells.get(3)?.parse().ok()?;
            Some((name.to_string(), layer))
        })
        .collect()
}

#[test]
fn the_crate_table_states_each_crates_layer_and_the_depth_as_the_code_has_them() {
    let layers = crate_layers();
    let chapter = std::fs::read_to_string(repo().join("docs/src/architecture.md")).unwrap();
    assert_eq!(
        table_layers(&chapter),
        layers.layer_of,
        "docs/src/architecture.md's crate table vs scripts/crate-layers"
    );
    let words = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven"];
    let stated = format!("a stack of crates, {} layers deep", words[layers.depth - 1]);
    assert!(chapter.contains(&stated), "the chapter should say {stated:?}");
    let depends = dependencies();
    let drawn = chapter
        .lines()
        .find(|line| line.starts_with("npugate → "))
        .unwrap_or_else(|| panic!("the chapter should draw one longest chain, as {}", layers.chain));
    let drawn: Vec<&str> = drawn.split(" → ").collect();
    assert_eq!(drawn.len(), layers.depth, "the chapter's chain {drawn:?} is not a longest one ({})", layers.chain);
    for pair in drawn.windows(2) {
        assert!(
            depends[pair[0]].contains(&pair[1].to_string()),
            "the chapter's chain: {} does not depend on {}",
            pair[0],
            pair[1]
        );
    }
    assert!(layers.depth <= 6, "the crates stack {} layers deep: {}", layers.depth, layers.chain);
    assert!(
        !depends["npugate-android"].contains(&"npugate-gate".to_string()),
        "device access must not import the judge"
    );
}

/// `cargo metadata` of the workspace's own packages.
fn metadata() -> serde_json::Value {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Each workspace crate → the workspace crates it depends on (normal and build dependencies).
fn dependencies() -> BTreeMap<String, Vec<String>> {
    let metadata = metadata();
    let packages = metadata["packages"].as_array().unwrap();
    packages
        .iter()
        .map(|package| {
            let names = package["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"] != "dev" && d["name"].as_str().is_some_and(|n| n.starts_with("npugate")))
                .map(|d| d["name"].as_str().unwrap().to_string())
                .collect();
            (package["name"].as_str().unwrap().to_string(), names)
        })
        .collect()
}

/// Each workspace crate → its folder relative to the repository (`judge/gate`), from `cargo metadata`.
fn crate_folders() -> BTreeMap<String, String> {
    let metadata = metadata();
    let root = metadata["workspace_root"].as_str().unwrap().to_string();
    metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|package| {
            let manifest = Path::new(package["manifest_path"].as_str().unwrap());
            let folder = manifest.parent().unwrap().strip_prefix(&root).unwrap();
            (package["name"].as_str().unwrap().to_string(), folder.to_string_lossy().into_owned())
        })
        .collect()
}

/// The crates of a drawn tree (`group/` lines, then `  folder/   npugate-x   purpose` lines under
/// them, or `folder/   npugate-x   purpose` at the root) → their folders.
fn tree_folders(document: &str) -> BTreeMap<String, String> {
    let mut group = String::new();
    let mut folders = BTreeMap::new();
    for line in document.lines() {
        let nested = line.starts_with("  ");
        let mut words = line.split_whitespace();
        let (Some(folder), second) = (words.next(), words.next()) else { continue };
        let Some(folder) = folder.strip_suffix('/').filter(|f| f.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
        else {
            continue;
        };
        match second.filter(|word| *word == "npugate" || word.starts_with("npugate-")) {
            Some(name) if nested => folders.insert(name.to_string(), format!("{group}/{folder}")),
            Some(name) => folders.insert(name.to_string(), folder.to_string()),
            None if !nested => {
                group = folder.to_string();
                None
            }
            None => None,
        };
    }
    folders
}

/// The folder column of a crate table: `| `name` | `folder/` | …` rows.
fn table_folders(document: &str) -> BTreeMap<String, String> {
    document
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let name = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            let folder = cells.get(2)?.strip_prefix('`')?.strip_suffix("/`")?;
            Some((name.to_string(), folder.to_string()))
        })
        .collect()
}

#[test]
fn the_trees_and_the_table_put_every_crate_in_the_folder_its_manifest_is_in() {
    let folders = crate_folders();
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let chapter = std::fs::read_to_string(repo().join("docs/src/architecture.md")).unwrap();
    assert_eq!(tree_folders(&readme), folders, "README.md's tree vs cargo metadata");
    assert_eq!(tree_folders(&chapter), folders, "docs/src/architecture.md's tree vs cargo metadata");
    assert_eq!(table_folders(&chapter), folders, "docs/src/architecture.md's crate table vs cargo metadata");
    let kept = ["harness", "profile-parser", "android", "tests"];
    for folder in kept {
        assert!(folders.values().any(|f| f == folder), "{folder}/ keeps the name the project was specified with");
    }
}
