//! What a run's result may bring into a person's Blender (the bridge's `import_scene_result`
//! and `import_gn_result`), checked in real Blender by `python/tests/result_checks.py`: a
//! result is made as viga's worker makes it (its program on a copy of the person's scene,
//! fingerprints, the run's own assets packed, the scene saved), then taken in by the
//! person's scene. What would read or write a file there (every Geometry Nodes importer,
//! a File Output node, an image, font or volume by path, a sound, a movie clip, a setting
//! naming a file) is refused with the scene as it was; the run's own images and fonts come
//! in packed, the person's own image stays theirs, and Blender's built-in font comes in.

use std::path::Path;
use std::process::Command;

use super::{bpy_python, run_checks};

#[test]
fn results_that_would_read_files_are_refused_and_their_own_assets_come_in() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/tests/result_checks.py");
    // One check per kind.
    run_checks(Command::new(bpy_python()).arg(script), 16);
}
