//! The verifier's render settings as `SceneSettings::verifier_render` resolves them: with a
//! target picture the default (Cycles, few samples, denoised) sees what Workbench hides, in
//! the renders from one camera and in the smaller canonical views alike.

use std::sync::Arc;
use std::time::Instant;

use viga_blender::{BlenderCommands as _, BlenderTransport};
use viga_domain_scene::SceneSettings;
use viga_protocol::bridge::{RenderEngine, RenderRequest, RenderSpec, SceneReset};
use viga_skills::metrics::photometric_loss;
use viga_testkit::{BLENDER_TEST_LIMIT, within};

use super::blender;

/// A cube on a floor under a point light of `watts`, and a camera looking at it.
fn lit(watts: u32) -> String {
    format!(
        "import bpy
bpy.ops.mesh.primitive_plane_add(size=10)
bpy.ops.mesh.primitive_cube_add(size=2, location=(0, 0, 1))
bpy.ops.object.light_add(type='POINT', location=(3, -3, 5))
bpy.context.object.data.energy = {watts}
bpy.ops.object.camera_add(location=(7, -7, 5), rotation=(1.1, 0, 0.785))
bpy.context.scene.camera = bpy.context.object
"
    )
}

/// The scene camera's view of `program`'s scene, and how long the render took.
async fn render(
    blender: &Arc<dyn BlenderTransport>,
    program: &str,
    spec: RenderSpec,
) -> (Vec<u8>, f64) {
    let ran = blender
        .execute(program, Some(SceneReset::Factory), None)
        .await
        .unwrap();
    assert!(ran.succeeded(), "{ran:?}");
    let started = Instant::now();
    let request = RenderRequest {
        camera: None,
        pose: None,
        spec,
        output_path: None,
    };
    let output = blender.render(request, None).await.unwrap();
    let seconds = started.elapsed().as_secs_f64();
    (output.image.data, seconds)
}

#[tokio::test]
async fn the_default_verifier_render_sees_a_light_change_that_workbench_hides() {
    within(BLENDER_TEST_LIMIT, "the renders", async {
        let mut settings = SceneSettings::default();
        settings.render.width = 64;
        settings.render.height = 64;
        let default = settings.verifier_render(true);
        assert_eq!(default.engine, RenderEngine::Cycles);
        let workbench = RenderSpec {
            engine: RenderEngine::Workbench,
            samples: None,
            ..default
        };
        // The canonical views: the same engine and samples at their own (smaller) size.
        let overview = settings.tool_render(true).overview_spec();
        assert_eq!((overview.width, overview.height), (32, 32));
        let blender = blender().await;
        let mut losses = Vec::new();
        for spec in [workbench, default, overview] {
            let (dim, dim_secs) = render(&blender, &lit(100), spec).await;
            let (bright, bright_secs) = render(&blender, &lit(1000), spec).await;
            let loss = photometric_loss(&dim, &bright).unwrap();
            eprintln!(
                "{spec}: PL between 100 W and 1000 W {loss:.6}; renders {dim_secs:.2} s and {bright_secs:.2} s"
            );
            losses.push(loss);
        }
        let (workbench_loss, default_loss, overview_loss) = (losses[0], losses[1], losses[2]);
        assert!(
            workbench_loss < 1e-6,
            "Workbench renders the two lights the same: PL {workbench_loss}"
        );
        assert!(
            default_loss > 1e-3,
            "the default verifier render tells them apart: PL {default_loss}"
        );
        assert!(
            overview_loss > 1e-3,
            "so does a canonical view at its default size: PL {overview_loss}"
        );
    })
    .await;
}
