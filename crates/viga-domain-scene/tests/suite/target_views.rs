//! A target whose view the programs never make (issue 35): from an empty scene, a target seen
//! from `Camera2`, and programs that never add that camera. The run cannot compare anything
//! with the target, so it does not end as a success, whatever the verifier says.

use viga_core::TargetSpec;
use viga_protocol::event::{FailureKind, StopReason};
use viga_testkit::{BLENDER_TEST_LIMIT, within};

use super::{
    GOOD_CODE, blender, code, config, provider, scene_settings, scene_with, text, verdict,
};

#[tokio::test]
async fn a_run_whose_programs_never_make_the_targets_camera_fails_saying_so() {
    within(BLENDER_TEST_LIMIT, "the run", async {
        let work = tempfile::tempdir().unwrap();
        let goal = work.path().join("goal.png");
        std::fs::write(&goal, viga_testkit::picture::halves_png(48, 48)).unwrap();
        let mut settings = config(1);
        settings.targets = vec![TargetSpec {
            path: goal,
            view: Some("Camera2".to_owned()),
            frame: None,
        }];
        let model = provider(vec![text("Plan: a crate."), code(GOOD_CODE), verdict(true)]);
        let domain = scene_with(blender().await, scene_settings(), true);
        let mut run = viga_core::start(settings, model, domain, &work.path().join("out")).unwrap();
        while run.next_event().await.is_some() {}
        let outcome = run.wait().await.unwrap();
        let StopReason::Failed { message, kind } = &outcome.stop else {
            panic!("the run did not fail: {:?}", outcome.stop);
        };
        assert_eq!(*kind, FailureKind::Other);
        assert!(
            message.contains("target view Camera2") && message.contains("never made it"),
            "{message}"
        );
        assert_ne!(outcome.stop.exit_code(), 0);
    })
    .await;
}
