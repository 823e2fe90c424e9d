//! `ContainedWorkers::start` on real Blender, through a stand-in launcher that records its
//! command line and contains nothing (the real launcher is the viga binary's, tested there).

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use viga_blender::StartBlender as _;

use viga_blender::{
    Access, BlenderCommands as _, ContainedWorkers, ContainmentPolicy, ContainmentStatus,
    WorkerRequest,
};
use viga_testkit::{BLENDER_TEST_LIMIT, within};

/// A launcher that appends its arguments to `launches.log` in `folder`, reports
/// `ContainmentStatus::off()` as a contained Blender's launcher reports its status, and runs
/// the program after `--` in a session of its own.
fn stand_in_launcher(folder: &Path) -> Vec<std::ffi::OsString> {
    let status = serde_json::to_string(&ContainmentStatus::off()).unwrap();
    let script = folder.join("launcher.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$@\" >> \"{log}\"\necho 'VIGA_CONTAINED {status}'\nwhile [ \"$1\" != \"--\" ]; do shift; done; shift\nexec setsid \"$@\"\n",
            log = folder.join("launches.log").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    vec![script.into()]
}

#[tokio::test]
async fn a_started_worker_gets_its_resolved_access_and_the_runs_assets() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let folder = tempfile::tempdir().unwrap();
        let launcher = stand_in_launcher(folder.path());
        let results = folder.path().join("run/results");
        let assets = folder.path().join("run/assets");
        let workers = ContainedWorkers::new(ContainmentPolicy::Auto, launcher);
        let request = WorkerRequest::new(super::blender(), Access::writing(vec![results.clone()]))
            .with_assets(Some(&assets))
            .named("contained-test".to_owned());
        let worker = workers.start(&request).await.unwrap();
        let result = worker
            .execute(
                "import os\nprint(os.environ['VIGA_ASSETS_DIR'])\n",
                None,
                None,
            )
            .await
            .unwrap();
        worker.shutdown().await;
        assert!(result.succeeded(), "{result:?}");
        let reachable = viga_blender::real_paths::real_path(&assets);
        assert_eq!(result.stdout.trim(), reachable.display().to_string());
        assert!(results.is_dir(), "the writable folder is made");
        let launches = std::fs::read_to_string(folder.path().join("launches.log")).unwrap();
        let writable = format!("--write {} ", results.canonicalize().unwrap().display());
        assert!(launches.contains(&writable), "{launches}");
        assert!(launches.contains("--policy auto"), "{launches}");
    })
    .await;
}

#[tokio::test]
async fn the_policy_off_starts_blender_without_the_launcher() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let folder = tempfile::tempdir().unwrap();
        let launcher = stand_in_launcher(folder.path());
        let workers = ContainedWorkers::new(ContainmentPolicy::Off, launcher);
        let request = WorkerRequest::new(super::blender(), Access::default());
        let worker = workers.start(&request).await.unwrap();
        let status = worker.containment();
        worker.shutdown().await;
        assert_eq!(status.policy, ContainmentPolicy::Off);
        assert!(!folder.path().join("launches.log").exists());
    })
    .await;
}
