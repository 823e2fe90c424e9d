mod locating;
mod oneshot;

use viga_blender::{BlenderLauncher, locate};

/// The Blender these tests drive. Real Blender is the point of these tests, so a missing
/// one fails loudly with the instruction to run `cargo xtask setup`.
pub(crate) fn blender() -> BlenderLauncher {
    match locate() {
        Ok(launcher) => launcher,
        Err(err) => panic!("{err}"),
    }
}
