mod addon_panel;
mod bridge_hardening;
mod bridge_wire;
mod commands;
mod contained;
mod frame_fuzz;
mod locating;
mod oneshot;
mod result_files;
mod supervision;

use viga_blender::{BlenderLauncher, Worker, WorkerConfig, locate};

/// The Blender these tests drive. Real Blender is the point of these tests, so a missing
/// one fails loudly with the instruction to run `cargo xtask setup`.
pub(crate) fn blender() -> BlenderLauncher {
    match locate() {
        Ok(launcher) => launcher,
        Err(err) => panic!("{err}"),
    }
}

pub(crate) async fn worker() -> Worker {
    Worker::start(WorkerConfig::new(blender())).await.unwrap()
}

/// Width and height from a PNG's IHDR chunk.
pub(crate) fn png_size(png: &[u8]) -> (u32, u32) {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(png[20..24].try_into().unwrap());
    (width, height)
}
