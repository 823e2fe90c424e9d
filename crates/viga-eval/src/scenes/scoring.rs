//! Scoring one program against an instance's goal in the instance's Blender: run it, render
//! every view, and measure PL, N-CLIP and the Chamfer distance, the heavy numeric work off
//! the async runtime.

use std::path::Path;
use std::sync::Arc;

use viga_blender::TransportError;

use crate::EvalError;
use crate::chamfer::{self, SurfaceIndex};
#[cfg(feature = "clip")]
use crate::clip::ClipBackend;
use crate::layout::Instance;
#[cfg(not(feature = "clip"))]
use crate::no_clip::ClipBackend;
use crate::scene::{self, Surface};
use crate::scores::ViewScore;

use super::{ProgramScores, Scorer, harness, write_pngs};

impl Scorer<'_> {
    /// Runs, renders (into `folder`) and scores the program.
    pub(super) async fn score(
        &self,
        code: &str,
        folder: &Path,
    ) -> Result<ProgramScores, EvalError> {
        let Scorer {
            config,
            instance,
            blender,
            goal,
            ref clip,
        } = *self;
        let mut scores = ProgramScores::default();
        // A program that hangs or crashes Blender is the proposal's failure, as is one that
        // raises; the worker has been restarted by its supervisor either way.
        let ran = match scene::run_program(blender, instance, code, config.timeout).await {
            Ok(ran) => ran,
            Err(err @ TransportError::Lost { .. }) => {
                scores.error = Some(format!("the program lost the Blender worker: {err}"));
                return Ok(scores);
            }
            Err(err) => return Err(err.into()),
        };
        if let Some(error) = ran.error {
            scores.error = Some(format!("the program raised {error}"));
            return Ok(scores);
        }
        let renders =
            match scene::render_views(blender, instance, config.render, config.timeout).await {
                Ok(renders) => renders,
                // E.g. the program deleted a camera: the public evaluator's "no PNG written".
                Err(err @ (TransportError::Refused { .. } | TransportError::Lost { .. })) => {
                    scores.error = Some(format!("a view could not be rendered: {err}"));
                    return Ok(scores);
                }
                Err(err) => return Err(err.into()),
            };
        write_pngs(folder, &renders)?;
        for ((camera, proposal), target) in instance.cameras().zip(&renders).zip(&goal.renders) {
            let pl = viga_skills::metrics::photometric_loss(proposal, target)
                .map_err(|err| harness(instance, format!("PL of {camera}: {err}")))?;
            scores.views.push(ViewScore {
                camera,
                pl,
                n_clip: None,
            });
        }
        scores.pl =
            Some(scores.views.iter().map(|view| view.pl).sum::<f64>() / scores.views.len() as f64);
        if let Some(goal_surface) = &goal.surface {
            match scene::surface(blender, config.timeout).await {
                Ok(surface) => match chamfer_off_the_runtime(
                    instance,
                    surface,
                    Arc::clone(goal_surface),
                    config.chamfer_points,
                )
                .await?
                {
                    Ok(cd) => scores.cd = Some(cd),
                    Err(err) => scores.cd_note = Some(err.to_string()),
                },
                Err(err) => scores.cd_note = Some(format!("surface unavailable: {err}")),
            }
        }
        if let Some(clip) = clip {
            let n_clips =
                n_clip_per_view(instance, Arc::clone(clip), renders, goal.renders.clone()).await?;
            for (view, n_clip) in scores.views.iter_mut().zip(&n_clips) {
                view.n_clip = Some(*n_clip);
            }
            scores.n_clip = Some(n_clips.iter().sum::<f64>() / n_clips.len() as f64);
        }
        Ok(scores)
    }
}

/// A surface indexed for nearest-triangle queries, on a blocking thread.
pub(super) async fn index_off_the_runtime(
    instance: &Instance,
    surface: Surface,
) -> Result<SurfaceIndex, EvalError> {
    tokio::task::spawn_blocking(move || SurfaceIndex::new(&surface.triangles))
        .await
        .map_err(|err| harness(instance, format!("indexing a surface panicked: {err}")))
}

/// Chamfer distance on a blocking thread: indexing, sampling and the nearest-triangle
/// queries take tens of milliseconds, which must not stall the async workers that drive the
/// other Blenders.
async fn chamfer_off_the_runtime(
    instance: &Instance,
    proposal: Surface,
    goal: Arc<SurfaceIndex>,
    points: usize,
) -> Result<Result<f64, chamfer::ChamferError>, EvalError> {
    tokio::task::spawn_blocking(move || {
        chamfer::chamfer_indexed(&SurfaceIndex::new(&proposal.triangles), &goal, points)
    })
    .await
    .map_err(|err| harness(instance, format!("the Chamfer computation panicked: {err}")))
}

/// N-CLIP of every proposal view against its goal view. The forward passes are CPU-bound, so
/// they run off the async workers.
async fn n_clip_per_view(
    instance: &Instance,
    clip: Arc<ClipBackend>,
    proposals: Vec<Vec<u8>>,
    goals: Vec<Vec<u8>>,
) -> Result<Vec<f64>, EvalError> {
    let cameras: Vec<String> = instance.cameras().collect();
    let computed = tokio::task::spawn_blocking(move || {
        let decode = |png: &[u8], camera: &str, which: &str| {
            image::load_from_memory(png)
                .map(|image| image.to_rgb8())
                .map_err(|err| format!("cannot decode the {which} render of {camera}: {err}"))
        };
        cameras
            .iter()
            .zip(proposals.iter().zip(&goals))
            .map(|(camera, (proposal, goal))| {
                let proposal = decode(proposal, camera, "proposal")?;
                let goal = decode(goal, camera, "goal")?;
                clip.n_clip(&proposal, &goal)
                    .map_err(|err| format!("N-CLIP of {camera}: {err}"))
            })
            .collect::<Result<Vec<f64>, String>>()
    })
    .await
    .map_err(|err| harness(instance, format!("N-CLIP panicked: {err}")))?;
    computed.map_err(|message| harness(instance, message))
}

#[cfg(test)]
#[cfg(feature = "clip")]
mod tests {
    use std::path::PathBuf;

    use candle_core::{DType, Device};
    use candle_nn::{Init, VarBuilder, VarMap};
    use candle_transformers::models::clip::text_model::Activation;
    use image::{ImageFormat, Rgb, RgbImage};

    use super::*;
    use crate::clip::ClipVisionConfig;
    use crate::layout::Task;

    fn png(image: &RgbImage) -> Vec<u8> {
        let mut bytes = std::io::Cursor::new(Vec::new());
        image.write_to(&mut bytes, ImageFormat::Png).unwrap();
        bytes.into_inner()
    }

    #[tokio::test]
    async fn n_clip_is_computed_per_view_and_bad_renders_are_harness_failures() {
        let config = ClipVisionConfig {
            embed_dim: 8,
            activation: Activation::QuickGelu,
            intermediate_size: 8,
            num_hidden_layers: 1,
            num_attention_heads: 1,
            projection_dim: 4,
            num_channels: 3,
            image_size: 224,
            patch_size: 32,
        };
        let varmap = VarMap::new();
        let randn = Init::Randn {
            mean: 0.0,
            stdev: 1.0,
        };
        varmap
            .get(
                8,
                "vision_model.embeddings.class_embedding",
                randn,
                DType::F32,
                &Device::Cpu,
            )
            .unwrap();
        let vars = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
        let clip = Arc::new(ClipBackend::new(vars, &config).unwrap());
        let instance = Instance {
            name: "placement1".to_owned(),
            task: Task::Placement,
            number: 1,
            dir: PathBuf::new(),
            blend: PathBuf::new(),
            start_py: PathBuf::new(),
            goal_py: PathBuf::new(),
            views: 2,
            description: None,
            visual_prompt: None,
        };
        let red = png(&RgbImage::from_pixel(64, 64, Rgb([200, 10, 10])));
        let stripes = png(&RgbImage::from_fn(64, 64, |x, _| {
            Rgb([(x * 4) as u8, 0, 90])
        }));

        let goals = vec![red.clone(), stripes.clone()];
        let same = n_clip_per_view(&instance, clip.clone(), goals.clone(), goals.clone())
            .await
            .unwrap();
        assert_eq!(same.len(), 2);
        assert!(same.iter().all(|n_clip| n_clip.abs() < 1e-6), "{same:?}");
        let swapped = vec![stripes, red.clone()];
        let different = n_clip_per_view(&instance, clip.clone(), swapped, goals.clone())
            .await
            .unwrap();
        assert!(different.iter().all(|n_clip| (0.0..=2.0).contains(n_clip)));

        let err = n_clip_per_view(&instance, clip, vec![red, b"not a png".to_vec()], goals)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("placement1") && err.contains("proposal render of Camera2"),
            "{err}"
        );
    }
}
