//! The `search` baseline: no model at all. The start program's numbers are fitted to the
//! goal views with renders in the loop (viga-domain-scene's [`refine`](viga_domain_scene::refine):
//! coordinate moves that expand while they improve, wider scans of counts, ties between
//! equal numbers, and a penalty for leaving the start scene's structure), within a budget of
//! scored programs. It is real inverse graphics without a VLM, and a floor any model must
//! beat.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use viga_blender::BlenderTransport;
use viga_domain_scene::refine::{FitView, RefineError, SceneObjective, SearchLimits, search};
use viga_protocol::bridge::SceneReset;

use crate::EvalError;
use crate::benchmark::{Context, Proposal, Proposer};
use crate::layout::Instance;
use crate::scenes::SceneBenchmark;
use crate::scores::{FitViews, RenderSpec};

/// A search that could not go on, for the instance it was searching.
pub(crate) fn refine_error(instance: &str, err: RefineError) -> EvalError {
    match err {
        RefineError::Blender(err) => EvalError::Blender(err),
        other => EvalError::Harness {
            instance: instance.to_owned(),
            message: format!("search: {other}"),
        },
    }
}

/// The search as a system under test.
#[derive(Debug, Clone)]
pub struct SearchProposer {
    /// Scored programs per instance, the start program included.
    pub budget: u32,
    /// How the search renders; the eval's own settings make its losses the reported ones.
    pub render: RenderSpec,
    pub timeout: Duration,
    /// The goal views whose mean PL the search minimises. With [`FitViews::AllScored`] it
    /// minimises PL on the very views it is scored on (an upper bound, not a fair comparison
    /// with a model); with [`FitViews::Only`] the other views are held out.
    pub fit_views: FitViews,
}

impl SearchProposer {
    /// The fitted views of `instance` with their goal renders, in camera order.
    fn fitted<'a>(
        &self,
        instance: &Instance,
        goal_renders: &'a [PathBuf],
    ) -> Result<Vec<(String, &'a PathBuf)>, EvalError> {
        let fitted: Vec<(String, &PathBuf)> = instance
            .cameras()
            .zip(goal_renders)
            .filter(|(camera, _)| self.fit_views.fits(camera))
            .collect();
        if let FitViews::Only(names) = &self.fit_views
            && fitted.len() != names.len()
        {
            return Err(self.missing_views(std::slice::from_ref(instance)));
        }
        Ok(fitted)
    }

    /// The instances that lack a fit view.
    fn lacking<'a>(&self, instances: &'a [Instance]) -> Vec<&'a Instance> {
        let FitViews::Only(names) = &self.fit_views else {
            return Vec::new();
        };
        instances
            .iter()
            .filter(|instance| {
                let cameras: Vec<String> = instance.cameras().collect();
                names.iter().any(|name| !cameras.contains(name))
            })
            .collect()
    }

    /// The error for instances that lack a fit view.
    fn missing_views(&self, instances: &[Instance]) -> EvalError {
        let lacking: Vec<String> = self
            .lacking(instances)
            .into_iter()
            .map(|instance| format!("{} has {} view(s)", instance.name, instance.views))
            .collect();
        let shown = if lacking.len() > 5 {
            format!(
                "{}, and {} more",
                lacking[..5].join(", "),
                lacking.len() - 5
            )
        } else {
            lacking.join(", ")
        };
        let named = match &self.fit_views {
            FitViews::Only(names) if names.len() > 1 => {
                format!("{} are not views", names.join(", "))
            }
            fit => format!("{} is not a view", fit.describe()),
        };
        EvalError::BadFitViews {
            message: format!(
                "{named} of every selected instance ({shown}); name views every instance has, or select fewer instances"
            ),
        }
    }
}

#[async_trait]
impl Proposer<SceneBenchmark> for SearchProposer {
    fn system(&self) -> String {
        match &self.fit_views {
            FitViews::AllScored => format!("search (budget {})", self.budget),
            FitViews::Only(names) => {
                format!(
                    "search (budget {}, fit on {})",
                    self.budget,
                    names.join("+")
                )
            }
        }
    }

    fn fit_views(&self) -> Option<FitViews> {
        Some(self.fit_views.clone())
    }

    fn check(&self, instances: &[Instance]) -> Result<(), EvalError> {
        if self.lacking(instances).is_empty() {
            Ok(())
        } else {
            Err(self.missing_views(instances))
        }
    }

    async fn propose(
        &self,
        instance: &Instance,
        context: Context<Arc<dyn BlenderTransport>>,
    ) -> Result<Proposal, EvalError> {
        let Context {
            worker: blender,
            goal: goal_renders,
            ..
        } = context;
        let start = std::fs::read_to_string(&instance.start_py)
            .map_err(|err| EvalError::io(&instance.start_py, err))?;
        let fitted = self.fitted(instance, &goal_renders)?;
        let views = fitted
            .iter()
            .map(|(camera, path)| {
                let target = std::fs::read(path).map_err(|err| EvalError::io(path, err))?;
                FitView::new(Some(camera.clone()), None, &target)
                    .map_err(|err| refine_error(&instance.name, err))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let cameras: Vec<String> = fitted.into_iter().map(|(camera, _)| camera).collect();
        let objective = SceneObjective::new(
            blender,
            SceneReset::Blend {
                path: instance.blend.to_string_lossy().into_owned(),
            },
            views,
            self.render,
            self.timeout,
        );
        let outcome = search(&start, &objective, &SearchLimits::budget(self.budget))
            .await
            .map_err(|err| refine_error(&instance.name, err))?;
        let rendered = outcome.rendered();
        Ok(Proposal {
            code: Some(outcome.code),
            note: Some(format!(
                "{} literals ({} free), {} programs scored; objective on the fit views ({}: PL at {} px plus the plausibility penalty) {} -> {}",
                outcome.literals,
                outcome.free,
                rendered,
                cameras.join(", "),
                viga_domain_scene::refine::search_render(self.render).width,
                outcome
                    .start_loss
                    .map_or("n/a".to_owned(), |l| format!("{l:.6}")),
                outcome
                    .best_loss
                    .map_or("n/a".to_owned(), |l| format!("{l:.6}")),
            )),
            // Every program the search kept was an improvement on the one before it by its
            // own objective, so the final one stands for them all.
            candidates: Vec::new(),
        })
    }
}
