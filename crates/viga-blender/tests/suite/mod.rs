mod addon_package;
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

/// Width and height from a PNG's header, as the transport reads them.
pub(crate) fn png_size(png: &[u8]) -> (u32, u32) {
    viga_blender::transport::png_dimensions(png).expect("not a PNG")
}

/// The Python of the bpy module, which the check scripts run in.
pub(crate) fn bpy_python() -> std::path::PathBuf {
    let BlenderLauncher::PythonModule { python } = blender() else {
        panic!("these checks need the bpy module (cargo xtask setup)");
    };
    python
}

/// Runs a check script and asserts its summary line: nothing failed and at least `least`
/// checks ran (a check dropped from the script must be dropped here too).
pub(crate) fn run_checks(command: &mut std::process::Command, least: u32) {
    let output = viga_testkit::output_within(command, viga_testkit::BLENDER_TEST_LIMIT);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary = stdout.lines().last().unwrap_or_default();
    assert!(
        output.status.success() && summary.ends_with(" 0 failed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let passed: u32 = summary.split(' ').next().unwrap().parse().unwrap();
    assert!(passed >= least, "only {passed} checks ran: {summary}");
}
