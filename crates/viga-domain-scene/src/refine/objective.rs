//! The search's objective in a real Blender: a program runs on the reloaded base scene, each
//! fitted view is rendered small ([`search_render`]) and compared with its target (mean
//! photometric loss over the views), plus a penalty for straying from the start scene's
//! structure ([`super::plausible`]), weighed against the start's own loss so that it means
//! the same in every scene. The penalty is known before anything renders: a program whose
//! penalty alone already loses is not rendered at all.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use image::RgbImage;
use viga_blender::{BlenderCommands as _, BlenderTransport, TransportError};
use viga_protocol::bridge::{RenderRequest, RenderSpec, SceneObject, SceneReset};
use viga_skills::metrics::{decode_rgb, photometric_loss_rgb, sized};

use super::RefineError;
use super::plausible::Structure;
use super::search::{Objective, Score};

/// The longest side of the search's renders: a quarter of the pixels of a 128-pixel eval,
/// which is enough to tell where things are and costs a third of the time.
pub const SEARCH_SIDE: u32 = 64;

/// The most samples a search render takes: the renders only need to rank candidates, and
/// Cycles' fixed seed keeps its noise alike between them.
pub const SEARCH_SAMPLES: u32 = 8;

/// How the search renders views made with `spec`: the same engine, at most
/// [`SEARCH_SAMPLES`] samples, no larger than [`SEARCH_SIDE`] on the long side, in the same
/// shape.
pub fn search_render(spec: RenderSpec) -> RenderSpec {
    let (width, height) = crate::settings::fit_within(spec.width, spec.height, SEARCH_SIDE);
    RenderSpec {
        width,
        height,
        samples: spec.samples.map(|samples| samples.min(SEARCH_SAMPLES)),
        ..spec
    }
}

/// One view the search fits: where it is seen from and what it should look like.
#[derive(Debug, Clone)]
pub struct FitView {
    /// A camera object; the scene camera when `None`.
    pub camera: Option<String>,
    /// The animation frame the target shows (4D scenes).
    pub frame: Option<i32>,
    pub target: RgbImage,
}

impl FitView {
    /// A view from an encoded target picture (PNG or JPEG).
    pub fn new(
        camera: Option<String>,
        frame: Option<i32>,
        target: &[u8],
    ) -> Result<Self, RefineError> {
        Ok(Self {
            camera,
            frame,
            target: decode_rgb(target, "target").map_err(RefineError::Target)?,
        })
    }
}

/// What straying from the structure costs, in start losses per unit of
/// [`super::plausible::Violations::total`]: a tenth of an object's size off its surface, or a
/// tenth of a radian off upright, costs about half of what the start loses to the target.
const PENALTY_WEIGHT: f64 = 5.0;

/// The most objects the structure reads (pages of the bridge's scene listing).
const MAX_OBJECTS: u32 = 2000;
const PAGE: u32 = 250;

/// Mean PL of a program's views against their targets, plus the plausibility penalty.
pub struct SceneObjective {
    blender: Arc<dyn BlenderTransport>,
    base: SceneReset,
    /// Each view, its target at the search's render size.
    views: Vec<FitView>,
    render: RenderSpec,
    timeout: Duration,
    /// The start scene's structure, once the start is scored.
    structure: OnceLock<Reference>,
}

/// What candidates are held to: the start scene's structure, what the start itself breaks of
/// it, and the start's loss, which weighs the penalty.
#[derive(Debug)]
struct Reference {
    structure: Structure,
    own: f64,
    weight: f64,
}

impl std::fmt::Debug for SceneObjective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SceneObjective")
            .field("views", &self.views.len())
            .field("render", &self.render)
            .finish_non_exhaustive()
    }
}

impl SceneObjective {
    /// Programs run on `base` in `blender`, within `timeout` each; the views render with
    /// `render`'s engine and samples at [`search_render`]'s size.
    pub fn new(
        blender: Arc<dyn BlenderTransport>,
        base: SceneReset,
        views: Vec<FitView>,
        render: RenderSpec,
        timeout: Duration,
    ) -> Self {
        let render = search_render(render);
        let views = views
            .into_iter()
            .map(|view| FitView {
                target: sized(view.target, render.width, render.height),
                ..view
            })
            .collect();
        Self {
            blender,
            base,
            views,
            render,
            timeout,
            structure: OnceLock::new(),
        }
    }

    /// Runs `code` on the base scene: false when it raised.
    async fn run(&self, code: &str) -> Result<bool, RefineError> {
        let ran = self
            .blender
            .execute(code, Some(self.base.clone()), Some(self.timeout))
            .await?;
        Ok(ran.error.is_none())
    }

    /// Every object of the scene as it stands (up to [`MAX_OBJECTS`]).
    async fn objects(&self) -> Result<Vec<SceneObject>, RefineError> {
        let mut objects = Vec::new();
        let mut offset = 0;
        loop {
            let page = self.blender.scene_info(offset, PAGE).await?;
            objects.extend(page.objects);
            match page.next_offset {
                Some(next) if next > offset && next < MAX_OBJECTS => offset = next,
                _ => return Ok(objects),
            }
        }
    }

    /// Mean PL of the views of the scene as it stands; `None` when a view cannot render (a
    /// program that broke a camera does not score, like one that raised).
    async fn picture_loss(&self) -> Result<Option<f64>, RefineError> {
        let mut total = 0.0;
        for view in &self.views {
            if let Some(frame) = view.frame {
                self.blender.set_frame(frame).await?;
            }
            let request = RenderRequest {
                camera: view.camera.clone(),
                pose: None,
                spec: self.render,
                output_path: None,
            };
            let rendered = match self.blender.render(request, Some(self.timeout)).await {
                Ok(output) => output.image.data,
                Err(TransportError::Refused { .. }) => return Ok(None),
                Err(err) => return Err(err.into()),
            };
            let picture = decode_rgb(&rendered, "render").map_err(RefineError::Render)?;
            // The render has the size asked for; a bridge answering another is resized as PL
            // resizes a target.
            let target = if picture.dimensions() == view.target.dimensions() {
                std::borrow::Cow::Borrowed(&view.target)
            } else {
                std::borrow::Cow::Owned(sized(
                    view.target.clone(),
                    picture.width(),
                    picture.height(),
                ))
            };
            total += photometric_loss_rgb(&picture, &target);
        }
        Ok(Some(total / self.views.len().max(1) as f64))
    }
}

#[async_trait]
impl Objective for SceneObjective {
    async fn start(&self, code: &str) -> Result<Option<f64>, RefineError> {
        if !self.run(code).await? {
            return Ok(None);
        }
        let objects = self.objects().await?;
        let structure = Structure::of(&objects);
        // What the start itself breaks (an object a hair off its surface, rounding) is its
        // own; only what a candidate breaks beyond it costs.
        let own = structure.violations(&objects).total();
        let loss = self.picture_loss().await?;
        if let Some(loss) = loss {
            let _ = self.structure.set(Reference {
                structure,
                own,
                weight: loss,
            });
        }
        Ok(loss)
    }

    async fn score(&self, code: &str, beat: f64) -> Result<Score, RefineError> {
        if !self.run(code).await? {
            return Ok(Score::Failed);
        }
        let penalty = match self.structure.get() {
            Some(reference) => {
                let total = reference
                    .structure
                    .violations(&self.objects().await?)
                    .total();
                PENALTY_WEIGHT * reference.weight * (total - reference.own).max(0.0)
            }
            None => 0.0,
        };
        if penalty >= beat {
            // The picture cannot make up for it: PL is never below 0.
            return Ok(Score::Refused(penalty));
        }
        Ok(match self.picture_loss().await? {
            Some(loss) => Score::Loss(loss + penalty),
            None => Score::Failed,
        })
    }
}
