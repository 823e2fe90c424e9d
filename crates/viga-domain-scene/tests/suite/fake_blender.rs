//! The fake Blender the loop's fast tests run on (`viga_testkit::blender`) answers as the
//! bridge would and fails only the calls it was told to.

use viga_blender::{BlenderTransport as _, Recovery, TransportError};
use viga_protocol::bridge::{CameraPose, RenderSpec};
use viga_testkit::blender::{FakeBlender, Fault, VIEW_CAMERA, grey_png};

#[test]
fn the_fake_frames_views_with_the_camera_viga_frames_them_with() {
    assert_eq!(VIEW_CAMERA, viga_skills::camera::VIEW_CAMERA);
}

#[test]
fn the_fake_png_is_a_png_of_the_requested_size() {
    for (width, height) in [(1, 1), (48, 32), (400, 400)] {
        let png = grey_png(width, height);
        assert_eq!(
            viga_skills::metrics::image_size(&png).unwrap(),
            (width, height)
        );
        // Decoded in full (checksums included), not only its header.
        viga_skills::montage::decode_view("fake", &png).unwrap();
    }
}

#[tokio::test]
async fn every_reply_has_the_shape_its_command_promises() {
    use viga_blender::BlenderCommands as _;
    use viga_protocol::bridge::{FramedViewsRequest, RenderEngine, RenderRequest};

    let blender = FakeBlender::new();
    let spec = RenderSpec {
        engine: RenderEngine::Workbench,
        width: 40,
        height: 30,
        samples: None,
    };
    assert!(
        blender
            .execute("pass", None, None)
            .await
            .unwrap()
            .succeeded()
    );
    let info = blender.scene_info(0, 1).await.unwrap();
    assert_eq!(
        (
            info.active_camera.as_deref(),
            info.objects.len(),
            info.next_offset
        ),
        (Some("Camera"), 1, Some(1))
    );
    let request = RenderRequest {
        camera: None,
        pose: None,
        spec,
        output_path: None,
    };
    let output = blender.render(request, None).await.unwrap();
    assert_eq!((output.width, output.height), (40, 30));
    let folder = tempfile::tempdir().unwrap();
    let written = folder.path().join("view.png");
    let request = FramedViewsRequest {
        objects: Vec::new(),
        padding: None,
        directions: vec![[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]],
        spec,
        output_paths: vec![
            written.to_string_lossy().into_owned(),
            folder.path().join("top.png").to_string_lossy().into_owned(),
        ],
    };
    let views = blender.render_framed_views(request, None).await.unwrap();
    assert_eq!(views.len(), 2);
    assert_eq!(views[1].framing.location, [0.0, 0.0, 7.0]);
    // The typed command decides where pictures travel: a caller's paths are not written to
    // (nor read back), and a transport without a shared folder gets them inline.
    assert!(!written.exists(), "the caller's path is not used");
    blender.set_camera(CameraPose::default()).await.unwrap();
    blender
        .set_visibility(vec!["Crate".into()], false)
        .await
        .unwrap();
    blender.set_frame(3).await.unwrap();
    blender.list_keyframes().await.unwrap();
    blender.save_blend("/nowhere/final.blend").await.unwrap();
    blender.load_blend("/nowhere/base.blend").await.unwrap();
    assert_eq!(
        blender.names(),
        [
            "execute",
            "scene_info",
            "render",
            "render_framed_views",
            "set_camera",
            "set_visibility",
            "set_frame",
            "list_keyframes",
            "save_blend",
            "load_blend"
        ]
    );
}

#[tokio::test]
async fn scripted_faults_hit_only_the_call_they_name() {
    use viga_blender::BlenderCommands as _;

    let blender = FakeBlender::new()
        .on("execute", 2, Fault::Lost)
        .on("execute", 3, Fault::Garbage)
        .on("scene_info", 1, Fault::Refuse);
    assert!(blender.execute("pass", None, None).await.is_ok());
    let lost = blender.execute("pass", None, None).await.unwrap_err();
    assert!(
        matches!(
            lost,
            TransportError::Lost {
                command: "execute",
                recovery: Recovery::Restarted { .. },
                ..
            }
        ),
        "{lost}"
    );
    let garbage = blender.execute("pass", None, None).await.unwrap_err();
    assert!(
        matches!(
            garbage,
            TransportError::MalformedReply {
                command: "execute",
                ..
            }
        ),
        "{garbage}"
    );
    assert!(blender.execute("pass", None, None).await.is_ok());
    let refused = blender.scene_info(0, 10).await.unwrap_err();
    assert!(
        matches!(refused, TransportError::Refused { .. }),
        "{refused}"
    );
    assert_eq!(blender.scene_info(0, 10).await.unwrap().total_objects, 2);
}

#[tokio::test]
async fn scripted_answers_versions_and_a_blender_that_never_starts() {
    use viga_blender::BlenderCommands as _;

    let blender = FakeBlender::new().blender_version("4.2.3 LTS");
    assert_eq!(
        blender.scene_info(0, 10).await.unwrap().blender_version,
        "4.2.3 LTS"
    );
    let listing = serde_json::json!({"addons": [], "problems": ["broken: on purpose"]});
    blender.answer("list_addons", listing.clone());
    let reply = blender
        .call(
            viga_protocol::bridge::BridgeCommand::ListAddons { folder: None },
            None,
        )
        .await
        .unwrap();
    assert_eq!(reply, listing);
    assert_eq!(blender.count("scene_info"), 1);

    let never = FakeBlender::new().failing_every_call(Fault::RestartFails);
    for _ in 0..2 {
        let error = never.scene_info(0, 10).await.unwrap_err();
        assert!(matches!(error, TransportError::Start(_)), "{error}");
    }
}
