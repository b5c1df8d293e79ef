//! Generates the gameplay-tag catalog from `config/tags.toml`.
//!
//! The output (`$OUT_DIR/catalog.rs`) holds one table of every tag, declared and implied parents,
//! sorted by name so lookups are a binary search, and one constant per declared tag. The build
//! fails with a message naming the offending entry when a tag is declared twice or is malformed,
//! so the catalog can never disagree with the code that uses it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Catalog {
    #[serde(default)]
    tag: Vec<Entry>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    doc: String,
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let path = manifest.join("../config/tags.toml");
    println!("cargo:rerun-if-changed={}", path.display());
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read the tag catalog {}: {e}", path.display()));
    let catalog: Catalog = toml::from_str(&text)
        .unwrap_or_else(|e| panic!("invalid tag catalog {}: {e}", path.display()));

    // name -> doc for declared tags; implied parents get `None`.
    let mut declared: BTreeMap<String, String> = BTreeMap::new();
    for entry in &catalog.tag {
        if let Err(why) = check_name(&entry.name) {
            panic!("tags.toml: tag {:?} is malformed: {why}", entry.name);
        }
        if entry.doc.trim().is_empty() || entry.doc.contains('\n') {
            panic!(
                "tags.toml: tag {:?} needs a `doc` of one non-empty line saying what it means, got {:?}",
                entry.name, entry.doc
            );
        }
        if declared.insert(entry.name.clone(), entry.doc.clone()).is_some() {
            panic!("tags.toml: tag {:?} is declared twice; declare each tag once", entry.name);
        }
    }
    let mut all: BTreeSet<String> = BTreeSet::new();
    for name in declared.keys() {
        let mut prefix = String::new();
        for segment in name.split('.') {
            if !prefix.is_empty() {
                prefix.push('.');
            }
            prefix.push_str(segment);
            all.insert(prefix.clone());
        }
    }
    let names: Vec<&String> = all.iter().collect();
    let index_of = |n: &str| names.iter().position(|x| x.as_str() == n);
    if names.len() > u16::MAX as usize {
        panic!("tags.toml: more than {} tags", u16::MAX);
    }

    let mut out = String::new();
    writeln!(out, "/// Every known tag name, declared or implied, sorted.").ok();
    writeln!(out, "static NAMES: [&str; {}] = [", names.len()).ok();
    for n in &names {
        writeln!(out, "    {n:?},").ok();
    }
    writeln!(out, "];").ok();
    writeln!(out, "/// Index of each tag's direct parent, or `u16::MAX` for a root.").ok();
    writeln!(out, "static PARENTS: [u16; {}] = [", names.len()).ok();
    for n in &names {
        let parent = n.rsplit_once('.').and_then(|(p, _)| index_of(p));
        writeln!(out, "    {},", parent.map_or(u16::MAX as usize, |p| p)).ok();
    }
    writeln!(out, "];").ok();
    writeln!(
        out,
        "/// Whether each tag is declared in the catalog (rather than implied as a parent)."
    )
    .ok();
    writeln!(out, "static DECLARED: [bool; {}] = [", names.len()).ok();
    for n in &names {
        writeln!(out, "    {},", declared.contains_key(n.as_str())).ok();
    }
    writeln!(out, "];").ok();
    writeln!(out, "/// Generated constants, one per declared tag in `config/tags.toml`.").ok();
    writeln!(out, "pub mod catalog {{").ok();
    writeln!(out, "    use super::GameplayTag;").ok();
    for (name, doc) in &declared {
        let index = index_of(name).unwrap_or_default();
        writeln!(out, "    #[doc = {:?}]", format!("`{name}`: {doc}")).ok();
        writeln!(out, "    pub const {}: GameplayTag = GameplayTag({index});", const_name(name))
            .ok();
    }
    writeln!(out, "    /// Every declared tag, in name order.").ok();
    writeln!(out, "    pub const ALL_DECLARED: [GameplayTag; {}] = [", declared.len()).ok();
    for name in declared.keys() {
        writeln!(out, "        {},", const_name(name)).ok();
    }
    writeln!(out, "    ];").ok();
    writeln!(out, "}}").ok();

    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default());
    std::fs::write(out_dir.join("catalog.rs"), out)
        .unwrap_or_else(|e| panic!("cannot write the generated catalog: {e}"));
}

/// The same rule as `GameplayTag::parse`, applied at build time.
fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("empty name");
    }
    for segment in name.split('.') {
        if segment.is_empty() {
            return Err("empty segment");
        }
        if !segment.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err("segments hold only ASCII letters, digits and '_'");
        }
    }
    Ok(())
}

/// `Lifecycle.Gate.Character.LocalReady` -> `LIFECYCLE_GATE_CHARACTER_LOCAL_READY`.
fn const_name(name: &str) -> String {
    let mut out = String::new();
    for (i, segment) in name.split('.').enumerate() {
        if i > 0 {
            out.push('_');
        }
        let mut prev_lower = false;
        for c in segment.chars() {
            if c.is_ascii_uppercase() && prev_lower {
                out.push('_');
            }
            prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
            out.push(c.to_ascii_uppercase());
        }
    }
    out
}
