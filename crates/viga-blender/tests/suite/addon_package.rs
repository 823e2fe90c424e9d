//! The extension zip as Blender's extensions platform takes it: Blender's own validator (the
//! `blender_ext.py validate` that `blender --command extension validate` runs, with Blender's
//! list of tags) accepts it, its licence is the GPL the platform requires, and no file in it
//! holds a path of the machine that built it.

use std::path::{Path, PathBuf};
use std::process::Command;

use viga_blender::addon::build_zip;

use super::bpy_python;

/// Runs `code` in the bpy module's Python and returns what it printed, trimmed.
fn python_output(python: &Path, code: &str, args: &[&Path]) -> String {
    let output = viga_testkit::output_within(
        Command::new(python).arg("-c").arg(code).args(args),
        viga_testkit::BLENDER_TEST_LIMIT,
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// Blender's scripts folder, asked of bpy itself, so the validator is the one of the Blender
/// the tests run.
fn blender_scripts(python: &Path) -> PathBuf {
    PathBuf::from(python_output(
        python,
        "import bpy; print(bpy.utils.system_resource('SCRIPTS'))",
        &[],
    ))
}

/// The folders of this machine a careless build would write into the zip: the checkout, the
/// build's output (where the viga binary is), the home folder and the folder the zip went to.
fn builder_paths(out_dir: &Path) -> Vec<String> {
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2);
    let mut paths: Vec<String> = checkout
        .into_iter()
        .chain([out_dir])
        .map(|path| path.display().to_string())
        .collect();
    if let Some(target) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.ancestors().nth(3).map(Path::to_path_buf))
    {
        paths.push(target.display().to_string());
    }
    if let Some(home) = std::env::var_os("HOME").filter(|home| home.len() > 1) {
        paths.push(home.to_string_lossy().into_owned());
    }
    paths
}

#[test]
fn blenders_own_validator_accepts_the_zip_under_the_gpl_with_no_path_of_the_builder() {
    let python = bpy_python();
    let dir = tempfile::tempdir().unwrap();
    let zip = build_zip(dir.path()).unwrap();

    let scripts = blender_scripts(&python);
    let validator = scripts.join("addons_core/bl_pkg/cli/blender_ext.py");
    let tags = scripts.join("modules/_bpy_internal/extensions/tags.py");
    assert!(
        validator.is_file() && tags.is_file(),
        "{}",
        scripts.display()
    );
    let output = viga_testkit::output_within(
        Command::new(&python)
            .arg(&validator)
            .arg("validate")
            .arg(&zip)
            .arg(format!("--valid-tags={}", tags.display())),
        viga_testkit::BLENDER_TEST_LIMIT,
    );
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success() && said.contains("Success parsing TOML"),
        "{said}"
    );

    let manifest = python_output(
        &python,
        "import json, sys, tomllib, zipfile\n\
         m = tomllib.loads(zipfile.ZipFile(sys.argv[1]).read('blender_manifest.toml').decode())\n\
         print(json.dumps({'license': m.get('license'), 'website': m.get('website')}))",
        &[&zip],
    );
    let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    assert_eq!(
        manifest,
        serde_json::json!({"license": ["SPDX:GPL-3.0-or-later"], "website": null})
    );

    let builder = builder_paths(dir.path());
    let mut archive = zip::ZipArchive::new(std::fs::File::open(&zip).unwrap()).unwrap();
    for index in 0..archive.len() {
        let mut file = archive.by_index(index).unwrap();
        let name = file.name().unwrap().into_owned();
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut bytes).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        for path in &builder {
            assert!(!text.contains(path.as_str()), "{name} holds {path}");
        }
    }
}
