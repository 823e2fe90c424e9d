//! Embeds every file of the Blender extension (`addon/`, its tests left out) and of the bridge
//! package (`python/viga_bridge/`) so `viga addon build` writes the zip, and a worker its
//! bridge, from the files in the repository, never from a copy kept by hand or a list of
//! names to update.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let manifest_dir = Path::new(&manifest_dir);
    let out_dir = std::env::var("OUT_DIR").unwrap_or_default();
    let embedded = [
        (
            "addon",
            "",
            "ADDON_FILES",
            "The extension's own files, by name, from `addon/`.",
            "addon_files.rs",
        ),
        (
            "python/viga_bridge",
            "viga_bridge/",
            "BRIDGE_FILES",
            "The bridge package's files, by path inside the folder that holds the package.",
            "bridge_files.rs",
        ),
    ];
    for (folder, prefix, name, doc, out) in embedded {
        embed(
            &manifest_dir.join(folder),
            prefix,
            name,
            doc,
            &Path::new(&out_dir).join(out),
        );
    }
}

/// Writes to `out` a constant `name` listing every `.py` and `.toml` file of `folder` (not
/// its subfolders) as (`prefix` + file name, contents), sorted by name.
fn embed(folder: &Path, prefix: &str, name: &str, doc: &str, out: &Path) {
    println!("cargo:rerun-if-changed={}", folder.display());
    let mut names: Vec<String> = std::fs::read_dir(folder)
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
    let mut code = format!("/// {doc}\npub(crate) const {name}: &[(&str, &str)] = &[\n");
    for file in &names {
        let path = folder.join(file);
        println!("cargo:rerun-if-changed={}", path.display());
        let _ = writeln!(
            code,
            "    ({:?}, include_str!({:?})),",
            format!("{prefix}{file}"),
            path.display().to_string()
        );
    }
    code.push_str("];\n");
    if let Err(err) = std::fs::write(out, code) {
        panic!("cannot write {}: {err}", out.display());
    }
}
