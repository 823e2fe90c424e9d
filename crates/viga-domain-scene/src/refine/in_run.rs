//! The scene domain's answer to the generator's `refine_numbers`: the run's target pictures
//! become the fitted views, its base scene the state every candidate starts from, and the
//! verifier's engine at the scoring size the render (searched at [`super::search_render`]'s).

use std::sync::Arc;
use std::time::Instant;

use viga_blender::{BlenderCommands as _, BlenderTransport};
use viga_core::domain::{Domain as _, RefineRequest, Refined, TargetView, ViewRender, WorkerFault};
use viga_protocol::bridge::RenderSpec;
use viga_protocol::message::ImageData;
use viga_skills::metrics::image_size;

use super::{FitView, RefineError, SceneObjective, SearchLimits, Selection, search};
use crate::SceneDomain;
use crate::watched::into_fault;

impl SceneDomain {
    /// [`viga_core::Domain::refine`] for scenes.
    pub(crate) async fn refine_program(
        &self,
        program: &str,
        request: &RefineRequest,
    ) -> Result<Result<Refined, String>, WorkerFault> {
        let targets = self.run_targets();
        let Some(first) = targets.first() else {
            return Ok(Err(
                "this run has no target picture to fit numbers to".to_owned()
            ));
        };
        let (width, height) = match image_size(&first.image.data) {
            Ok(size) => self.settings.scoring_size(size.0, size.1),
            Err(err) => return Ok(Err(format!("the target picture cannot be read: {err}"))),
        };
        let render = RenderSpec {
            width,
            height,
            ..self.verifier_render()
        };
        let mut views = Vec::with_capacity(targets.len());
        for target in &targets {
            let camera = match self.target_camera(target).await? {
                Ok(camera) => camera,
                Err(why) => return Ok(Err(why)),
            };
            match FitView::new(Some(camera), target.frame, &target.image.data) {
                Ok(view) => views.push(view),
                Err(err) => return Ok(Err(err.to_string())),
            }
        }
        let blender = Arc::clone(&self.blender) as Arc<dyn BlenderTransport>;
        let objective = SceneObjective::new(
            Arc::clone(&blender),
            self.settings.base_scene(),
            views,
            render,
            request.program_timeout.min(request.time_limit),
        );
        let limits = SearchLimits {
            budget: request.budget,
            deadline: Some(Instant::now() + request.time_limit),
            selection: request
                .lines
                .clone()
                .map_or(Selection::All, Selection::Lines),
        };
        let outcome = match search(program, &objective, &limits).await {
            Ok(outcome) => outcome,
            Err(RefineError::Blender(err)) => return Err(into_fault(err)),
            Err(err) => return Ok(Err(err.to_string())),
        };
        let (Some(loss_before), Some(loss_after)) = (outcome.start_loss, outcome.best_loss) else {
            return Ok(Err(
                "the program fails when it runs from the starting state; fix it with execute_code first".to_owned(),
            ));
        };
        let renders = self
            .renders_of(&outcome.code, &targets, request.program_timeout)
            .await?;
        let programs = outcome.rendered();
        Ok(Ok(Refined {
            code: outcome.code,
            loss_before,
            loss_after,
            programs,
            free: outcome.free,
            changes: outcome.changes,
            out_of_time: outcome.out_of_time,
            renders,
        }))
    }

    /// The renders of `program`'s scene from each target's view, as the loop scores them
    /// ([`viga_core::Domain::render_view`]); none when the program fails (or runs past
    /// `timeout`), and none of a view that cannot be shown.
    async fn renders_of(
        &self,
        program: &str,
        targets: &[TargetView],
        timeout: std::time::Duration,
    ) -> Result<Vec<ImageData>, WorkerFault> {
        let ran = self
            .blender
            .execute(program, Some(self.settings.base_scene()), Some(timeout))
            .await
            .map_err(into_fault)?;
        if !ran.succeeded() {
            return Ok(Vec::new());
        }
        let mut renders = Vec::with_capacity(targets.len());
        for target in targets {
            // Every target decoded when its view was made; one that does not is not shown.
            let Ok((width, height)) = image_size(&target.image.data) else {
                continue;
            };
            if let ViewRender::Rendered { picture, .. } =
                self.render_view(target, width, height).await?
            {
                renders.push(picture.image);
            }
        }
        Ok(renders)
    }

    /// The run's target pictures, as [`viga_core::Domain::begin_run`] gave them.
    pub(crate) fn run_targets(&self) -> Vec<TargetView> {
        self.targets
            .lock()
            .map(|targets| targets.clone())
            .unwrap_or_default()
    }
}
