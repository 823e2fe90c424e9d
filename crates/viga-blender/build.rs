//! Embeds every file of the Blender extension (`addon/`, its tests left out) so `viga addon
//! build` writes the zip from the files in the repository, never from a copy kept by hand.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let addon = Path::new(&manifest_dir).join("addon");
    println!("cargo:rerun-if-changed={}", addon.display());
    let mut names: Vec<String> = std::fs::read_dir(&addon)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|entry| entry.file_type().is_ok_and(|t| t.is_file()))
                .filter_map(|entry| entry.file_name().into_string().ok())
                .filter(|name| name.ends_with(".py") || name.ends_with(".toml"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let mut code = String::from(
        "/// The extension's own files, by name, from `addon/`.\npub(crate) const ADDON_FILES: &[(&str, &str)] = &[\n",
    );
    for name in &names {
        let path = addon.join(name);
        println!("cargo:rerun-if-changed={}", path.display());
        let _ = writeln!(
            code,
            "    ({name:?}, include_str!({:?})),",
            path.display().to_string()
        );
    }
    code.push_str("];\n");
    let out = Path::new(&std::env::var("OUT_DIR").unwrap_or_default()).join("addon_files.rs");
    if let Err(err) = std::fs::write(&out, code) {
        panic!("cannot write {}: {err}", out.display());
    }
}
