//! `viga run --generator search` as a library: inverse graphics without a model. The numbers
//! of a start program are searched with renders in the loop until its view from the target's
//! camera matches the target picture as closely as the budget allows, and the result is kept
//! in a folder (`start.py`, `best.py`, `best.png`, `target.png`, `result.json`, and
//! `containment.json`, what the Blender that ran the programs was contained under), each
//! file written whole.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use viga_blender::{BlenderCommands as _, BlenderTransport};
use viga_domain_scene::refine::{
    FitView, Objective, RefineError, SceneObjective, Score, SearchLimits, SearchOutcome, search,
};
use viga_protocol::bridge::{RenderEngine, RenderRequest, RenderSpec, SceneReset};
use viga_skills::metrics::{image_size, photometric_loss};

use crate::EvalError;
use crate::search::refine_error;

/// Blender may take long on a big scene; a program that takes longer is a failure.
const PROGRAM_TIMEOUT: Duration = Duration::from_secs(600);

/// What to search.
#[derive(Debug, Clone)]
pub struct SceneSearch {
    /// The program whose numeric literals are searched.
    pub start: String,
    /// The picture (PNG or JPEG) the render should match; its size is the render's.
    pub target: Vec<u8>,
    /// The scene every program starts from.
    pub base: SceneReset,
    /// The camera the target shows; the start program's active camera when `None`.
    pub camera: Option<String>,
    /// Engine and samples (the size comes from the target; Cycles gets 16 samples unless
    /// told otherwise).
    pub render: RenderSpec,
    /// Programs the search may score (at least 2: the start program and one move).
    pub budget: u32,
}

/// What a search found, and where it is kept.
#[derive(Debug, Clone)]
pub struct SceneSearchReport {
    pub folder: PathBuf,
    pub camera: String,
    pub outcome: SearchOutcome,
}

/// Runs the search on `blender` and keeps the result in `folder`. `on_improvement` hears of
/// each better program: its number and its photometric loss.
pub async fn run_scene_search(
    spec: &SceneSearch,
    blender: Arc<dyn BlenderTransport>,
    folder: &Path,
    on_improvement: &(dyn Fn(u32, f64) + Send + Sync),
) -> Result<SceneSearchReport, EvalError> {
    let refuse = |message: String| EvalError::Harness {
        instance: "search".to_owned(),
        message,
    };
    if spec.budget < 2 {
        return Err(refuse(
            "the search budget must be at least 2 (the start program and one move)".to_owned(),
        ));
    }
    let (width, height) =
        image_size(&spec.target).map_err(|err| refuse(format!("the target: {err}")))?;
    let camera = match &spec.camera {
        Some(camera) => camera.clone(),
        None => start_camera(spec, blender.as_ref()).await?,
    };
    let render = RenderSpec {
        width,
        height,
        samples: spec
            .render
            .samples
            .or((spec.render.engine == RenderEngine::Cycles).then_some(16)),
        ..spec.render
    };
    let view = FitView::new(Some(camera.clone()), None, &spec.target)
        .map_err(|err| refine_error("search", err))?;
    let objective = Improvements {
        inner: SceneObjective::new(
            Arc::clone(&blender),
            spec.base.clone(),
            vec![view],
            render,
            PROGRAM_TIMEOUT,
        ),
        scored: AtomicU32::new(0),
        best: Mutex::new(f64::INFINITY),
        on_improvement,
    };
    let outcome = search(&spec.start, &objective, &SearchLimits::budget(spec.budget))
        .await
        .map_err(|err| refine_error("search", err))?;
    keep(spec, blender.as_ref(), folder, &camera, render, &outcome).await?;
    Ok(SceneSearchReport {
        folder: folder.to_path_buf(),
        camera,
        outcome,
    })
}

/// The active camera of the start program's scene.
async fn start_camera(
    spec: &SceneSearch,
    blender: &dyn BlenderTransport,
) -> Result<String, EvalError> {
    let ran = blender
        .execute(&spec.start, Some(spec.base.clone()), Some(PROGRAM_TIMEOUT))
        .await?;
    if let Some(error) = ran.error {
        return Err(EvalError::Harness {
            instance: "search".to_owned(),
            message: format!("the start program fails: {error}"),
        });
    }
    blender
        .scene_info(0, 1)
        .await?
        .active_camera
        .ok_or_else(|| EvalError::Harness {
            instance: "search".to_owned(),
            message: "the start program's scene has no camera; name the target's camera".to_owned(),
        })
}

/// Writes the search's files into `folder`: the programs, the target, the best program's
/// render (when it runs), the figures and the containment `blender` runs under.
async fn keep(
    spec: &SceneSearch,
    blender: &dyn BlenderTransport,
    folder: &Path,
    camera: &str,
    render: RenderSpec,
    outcome: &SearchOutcome,
) -> Result<(), EvalError> {
    let write = |name: &str, bytes: &[u8]| crate::write_atomic(&folder.join(name), bytes);
    write("start.py", spec.start.as_bytes())?;
    write("best.py", outcome.code.as_bytes())?;
    write("target.png", &spec.target)?;
    let start_loss = view_loss(spec, blender, &spec.start, camera, render).await?;
    let best = if outcome.code == spec.start {
        start_loss.clone()
    } else {
        view_loss(spec, blender, &outcome.code, camera, render).await?
    };
    if let Some((image, _)) = &best {
        write("best.png", image)?;
    }
    let result = serde_json::json!({
        "generator": "search",
        "camera": camera,
        "literals": outcome.literals,
        "programs_scored": outcome.rendered(),
        "programs_turned_down": outcome.refused,
        "start_photometric_loss": start_loss.map(|(_, loss)| loss),
        "best_photometric_loss": best.map(|(_, loss)| loss),
        "start_objective": outcome.start_loss,
        "best_objective": outcome.best_loss,
    });
    let text = serde_json::to_string_pretty(&result).map_err(|err| EvalError::io(folder, err))?;
    write("result.json", text.as_bytes())?;
    if let Some(status) = blender.containment() {
        let text =
            serde_json::to_string_pretty(&status).map_err(|err| EvalError::io(folder, err))?;
        write(viga_core::folder::CONTAINMENT_FILE, text.as_bytes())?;
    }
    Ok(())
}

/// The render of `code`'s scene from `camera` at the target's size and its PL against the
/// target; `None` when the program fails.
async fn view_loss(
    spec: &SceneSearch,
    blender: &dyn BlenderTransport,
    code: &str,
    camera: &str,
    render: RenderSpec,
) -> Result<Option<(Vec<u8>, f64)>, EvalError> {
    let ran = blender
        .execute(code, Some(spec.base.clone()), Some(PROGRAM_TIMEOUT))
        .await?;
    if ran.error.is_some() {
        return Ok(None);
    }
    let request = RenderRequest {
        camera: Some(camera.to_owned()),
        pose: None,
        spec: render,
        output_path: None,
    };
    let image = blender.render(request, Some(PROGRAM_TIMEOUT)).await?.image;
    let loss = photometric_loss(&image.data, &spec.target).map_err(|err| EvalError::Harness {
        instance: "search".to_owned(),
        message: format!("scoring the result: {err}"),
    })?;
    Ok(Some((image.data, loss)))
}

/// Tells of each improvement as the search finds it.
struct Improvements<'a> {
    inner: SceneObjective,
    scored: AtomicU32,
    best: Mutex<f64>,
    on_improvement: &'a (dyn Fn(u32, f64) + Send + Sync),
}

#[async_trait]
impl Objective for Improvements<'_> {
    async fn start(&self, code: &str) -> Result<Option<f64>, RefineError> {
        let loss = self.inner.start(code).await?;
        self.heard(loss);
        Ok(loss)
    }

    async fn score(&self, code: &str, beat: f64) -> Result<Score, RefineError> {
        let score = self.inner.score(code, beat).await?;
        if let Score::Loss(loss) = score {
            self.heard(Some(loss));
        }
        Ok(score)
    }
}

impl Improvements<'_> {
    fn heard(&self, loss: Option<f64>) {
        let count = self.scored.fetch_add(1, Ordering::Relaxed) + 1;
        if let (Some(loss), Ok(mut best)) = (loss, self.best.lock())
            && loss < *best
        {
            *best = loss;
            (self.on_improvement)(count, loss);
        }
    }
}
