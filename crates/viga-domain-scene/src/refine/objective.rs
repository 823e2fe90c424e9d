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
use super::literals::{Literal, with_values};
use super::plausible::Structure;
use super::search::{Objective, Score};
use super::sight::{Placed, Projection, location_tuples, patches, suggestions};

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
            let Some(picture) = self.picture(view).await? else {
                return Ok(None);
            };
            total += photometric_loss_rgb(&picture, &view.target);
        }
        Ok(Some(total / self.views.len().max(1) as f64))
    }

    /// The scene as it stands rendered from `view`, at its target's size; `None` when the
    /// view cannot render.
    async fn picture(&self, view: &FitView) -> Result<Option<RgbImage>, RefineError> {
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
        // The render has the size asked for; a bridge answering another is resized to the
        // target's (the search's pictures only rank its candidates).
        Ok(Some(if picture.dimensions() == view.target.dimensions() {
            picture
        } else {
            sized(picture, view.target.width(), view.target.height())
        }))
    }

    /// `view`'s camera projection in the scene as it stands, at the search's render size
    /// (read by a short program: Blender's own camera matrix, its sensor fit included);
    /// `None` when the camera is missing or cannot project.
    async fn projection(&self, view: &FitView) -> Result<Option<Projection>, RefineError> {
        let camera = match &view.camera {
            Some(name) => format!(
                "bpy.data.objects.get({})",
                serde_json::to_string(name).unwrap_or_default()
            ),
            None => "bpy.context.scene.camera".to_owned(),
        };
        let code = format!(
            "import bpy, json\n\
             camera = {camera}\n\
             if camera is not None and camera.type == 'CAMERA':\n    \
             depsgraph = bpy.context.evaluated_depsgraph_get()\n    \
             matrix = camera.calc_matrix_camera(depsgraph, x={w}, y={h}) @ camera.matrix_world.inverted()\n    \
             print('{PROJECTION_MARK}' + json.dumps([list(row) for row in matrix]))\n",
            w = self.render.width,
            h = self.render.height,
        );
        let ran = self
            .blender
            .execute(&code, None, Some(self.timeout))
            .await?;
        let matrix = ran
            .stdout
            .lines()
            .find_map(|line| line.strip_prefix(PROJECTION_MARK))
            .and_then(|json| serde_json::from_str::<[[f64; 4]; 4]>(json).ok());
        Ok(
            matrix
                .and_then(|matrix| Projection::new(matrix, self.render.width, self.render.height)),
        )
    }

    /// The objects the location tuples of `code` place, with how each tuple moves its
    /// object: the program is run with each tuple's first and second number nudged in turn
    /// ([`PROBE`]), and the one object whose own location followed is the tuple's (a tuple
    /// that places several objects, or none, is left out).
    async fn placed(
        &self,
        code: &str,
        literals: &[Literal],
        values: &[f64],
        tuples: Vec<[usize; 3]>,
    ) -> Result<Vec<Placed>, RefineError> {
        if !self.run(code).await? {
            return Ok(Vec::new());
        }
        let before = self.objects().await?;
        let mut placed = Vec::new();
        'tuples: for tuple in tuples {
            let mut found: Option<&SceneObject> = None;
            let mut shift = [[0.0; 2]; 2];
            for (axis, column) in shift.iter_mut().enumerate() {
                let mut nudged = values.to_vec();
                nudged[tuple[axis]] += PROBE;
                if !self.run(&with_values(code, literals, &nudged)).await? {
                    continue 'tuples;
                }
                let after = self.objects().await?;
                let mut moved = before
                    .iter()
                    .zip(&after)
                    .filter(|(old, new)| old.name == new.name && old.location != new.location);
                let (Some((old, new)), None) = (moved.next(), moved.next()) else {
                    continue 'tuples;
                };
                if found.is_some_and(|object| object.name != old.name) {
                    continue 'tuples;
                }
                found = Some(old);
                for (ground, slot) in column.iter_mut().enumerate() {
                    let centre = |o: &SceneObject| (o.bbox_min[ground] + o.bbox_max[ground]) * 0.5;
                    *slot = (centre(new) - centre(old)) / PROBE;
                }
            }
            if let Some(object) = found {
                placed.push(Placed {
                    tuple,
                    low: object.bbox_min,
                    high: object.bbox_max,
                    shift,
                });
            }
        }
        Ok(placed)
    }
}

/// How far a location's number is nudged to learn which object it places.
const PROBE: f64 = 0.1;

/// What the short program that reads a camera's projection prints before its matrix.
const PROJECTION_MARK: &str = "VIGA_PROJECTION ";

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

    /// The first view's render and target compared, each placed object carried to the
    /// patches where they differ ([`super::sight`]).
    async fn suggest(
        &self,
        code: &str,
        literals: &[Literal],
        movable: &[bool],
    ) -> Result<Vec<Vec<(usize, f64)>>, RefineError> {
        let tuples = location_tuples(code, literals, movable);
        let Some(view) = self.views.first() else {
            return Ok(Vec::new());
        };
        if tuples.is_empty() {
            return Ok(Vec::new());
        }
        let values: Vec<f64> = literals.iter().map(|literal| literal.value).collect();
        let placed = self.placed(code, literals, &values, tuples).await?;
        if placed.is_empty() || !self.run(code).await? {
            return Ok(Vec::new());
        }
        let Some(projection) = self.projection(view).await? else {
            return Ok(Vec::new());
        };
        let Some(picture) = self.picture(view).await? else {
            return Ok(Vec::new());
        };
        Ok(suggestions(
            &projection,
            &patches(&picture, &view.target),
            &placed,
            &values,
        ))
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
