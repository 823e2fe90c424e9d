//! Where a Geometry Nodes run works, and what becomes of a person's scene around it.
//!
//! A run works in viga's own Blender ([`Workbench::own`]); attached to a person's Blender,
//! either on a copy of their open scene in viga's worker ([`Workbench::copy_of`], see
//! [`crate::attached`]) or, in trusted mode, on their scene itself ([`Workbench::live`]).
//! [`Workbench::finish`] is the one call after the run: it keeps the copy in the run folder
//! (`base.blend`, as attached scene runs do) and settles the person's scene. On a copy, a done
//! run's result comes into their scene as one undo step named after the request, and a
//! result that cannot come in fails the run, leaving their scene as it was. Live, a done run
//! becomes one undo step and any other is taken back.

use std::path::Path;
use std::sync::Arc;

use viga_blender::{BlenderCommands as _, BlenderTransport};
use viga_core::folder::BASE_SNAPSHOT;
use viga_protocol::event::{FailureKind, StopReason};
use viga_protocol::gn::GnResultImported;

use crate::attached::{SceneCopy, import_result};
use crate::run::FINAL_BLEND;
use crate::{GnBlender, GnError, GnOutcome, RunState};

/// The Blender a run works in, and the person's scene around it.
pub struct Workbench {
    place: Place,
    blender: GnBlender,
}

impl std::fmt::Debug for Workbench {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let place = match &self.place {
            Place::Own => "viga's own Blender",
            Place::Copy { .. } => "a copy of a person's scene",
            Place::Live { .. } => "a person's scene (trusted)",
        };
        f.debug_struct("Workbench")
            .field("place", &place)
            .field("blender", &self.blender)
            .finish()
    }
}

enum Place {
    /// viga's own Blender, on its own scene.
    Own,
    /// viga's own Blender, on a copy of the person's open scene; `staging` holds the copy
    /// until the run folder exists.
    Copy {
        user: Arc<dyn BlenderTransport>,
        copy: SceneCopy,
        staging: tempfile::TempDir,
    },
    /// The person's Blender itself: the run edits their scene as it goes.
    Live { user: Arc<dyn BlenderTransport> },
}

/// How a run ended once [`Workbench::finish`] settled the person's scene.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    /// The run's own stop, or a failure when a done run's result could not come into the
    /// person's scene.
    pub stop: StopReason,
    /// What came into the person's scene (a done run on a copy).
    pub imported: Option<GnResultImported>,
}

impl Workbench {
    /// A run in `worker`, viga's own Blender, on its own scene.
    pub fn own(worker: Arc<dyn BlenderTransport>) -> Self {
        Self {
            place: Place::Own,
            blender: GnBlender::new(worker),
        }
    }

    /// A run on the scene open in `user` (a person's Blender) itself: trusted mode, which
    /// the front end has the person confirm for the run.
    pub fn live(user: Arc<dyn BlenderTransport>) -> Self {
        Self {
            blender: GnBlender::new(Arc::clone(&user)),
            place: Place::Live { user },
        }
    }

    /// A run in `worker`, viga's own Blender, on a copy of the scene open in `user` (a
    /// person's Blender), which stays as it is until the run is over
    /// ([`SceneCopy::open`]).
    pub async fn copy_of(
        user: Arc<dyn BlenderTransport>,
        worker: Arc<dyn BlenderTransport>,
    ) -> Result<Self, GnError> {
        let blender = GnBlender::new(worker);
        let staging = tempfile::Builder::new()
            .prefix("viga-gn-copy-")
            .tempdir()
            .map_err(|err| {
                GnError::file(
                    std::env::temp_dir(),
                    format!("cannot make a folder for the copy of your scene: {err}"),
                )
            })?;
        let copy =
            SceneCopy::open(user.as_ref(), &blender, &staging.path().join(BASE_SNAPSHOT)).await?;
        Ok(Self {
            place: Place::Copy {
                user,
                copy,
                staging,
            },
            blender,
        })
    }

    /// The Blender the run's steps go to.
    pub fn blender(&self) -> &GnBlender {
        &self.blender
    }

    /// Whether the run is on a person's scene (a copy of it, or itself).
    pub fn is_attached(&self) -> bool {
        !matches!(self.place, Place::Own)
    }

    /// Settles the person's scene after the run that asked `request` ended with `outcome`
    /// (see the [module documentation](self)); the copy is kept in the run folder first.
    /// `Err` when the copy cannot be kept, or when their own Blender fails to record or take
    /// back a live run.
    pub async fn finish(&self, outcome: &GnOutcome, request: &str) -> Result<Finished, GnError> {
        if let Some(folder) = &outcome.folder {
            self.keep_copy(folder)?;
        }
        let undo_name = viga_domain_scene::attached::undo_name(request);
        let done = outcome.state == RunState::Done;
        match &self.place {
            Place::Own => {}
            Place::Live { user } if done => {
                user.undo_push(&undo_name)
                    .await
                    .map_err(|source| GnError::Blender {
                        function: "undo_push".to_owned(),
                        source,
                    })?
            }
            Place::Live { user } => discard_changes(user.as_ref(), &undo_name).await?,
            Place::Copy { .. } if !done => {}
            Place::Copy { user, copy, .. } => {
                return Ok(
                    match self
                        .bring_back(user.as_ref(), copy, outcome, &undo_name)
                        .await
                    {
                        Ok(imported) => Finished {
                            stop: outcome.stop.clone(),
                            imported: Some(imported),
                        },
                        Err(err) => Finished {
                            stop: StopReason::failed(err.to_string(), FailureKind::Other),
                            imported: None,
                        },
                    },
                );
            }
        }
        Ok(Finished {
            stop: outcome.stop.clone(),
            imported: None,
        })
    }

    /// Keeps the copy of the person's scene in the run `folder`, as attached scene runs do.
    fn keep_copy(&self, folder: &Path) -> Result<(), GnError> {
        if let Place::Copy { staging, .. } = &self.place {
            let target = folder.join(BASE_SNAPSHOT);
            std::fs::copy(staging.path().join(BASE_SNAPSHOT), &target).map_err(|err| {
                GnError::file(
                    &target,
                    format!("cannot keep the copy of your scene: {err}"),
                )
            })?;
        }
        Ok(())
    }

    /// Brings what the done run made in the worker into the person's scene, from the
    /// `final.blend` the run saved in its folder, as one undo step.
    async fn bring_back(
        &self,
        user: &dyn BlenderTransport,
        copy: &SceneCopy,
        outcome: &GnOutcome,
        undo_name: &str,
    ) -> Result<GnResultImported, GnError> {
        let result = copy.result(&self.blender, &outcome.targets).await?;
        // Without a run folder the run saved no scene.
        let Some(blend) = outcome
            .folder
            .as_ref()
            .map(|folder| folder.join(FINAL_BLEND))
            .filter(|blend| blend.is_file())
        else {
            return Err(GnError::Result(
                "the run's scene was not saved (see the warning above)".to_owned(),
            ));
        };
        import_result(user, &blend, &result, undo_name).await
    }
}

/// Takes back what a run changed in a person's scene: back to the last undo step, the
/// state before the run.
async fn discard_changes(user: &dyn BlenderTransport, undo_name: &str) -> Result<(), GnError> {
    let failed = |function: &str| {
        let function = function.to_owned();
        move |source| GnError::Blender { function, source }
    };
    user.undo_push(&format!("{undo_name} (discarded)"))
        .await
        .map_err(failed("undo_push"))?;
    user.undo().await.map_err(failed("undo"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use viga_protocol::bridge::BridgeCommand;
    use viga_protocol::iteration::ExecutionResult;
    use viga_testkit::blender::FakeBlender;

    use super::*;
    use crate::telemetry::Telemetry;

    fn outcome(state: RunState, stop: StopReason) -> GnOutcome {
        GnOutcome {
            state,
            rounds: 1,
            final_message: String::new(),
            stop,
            transitions: Vec::new(),
            steps: Vec::new(),
            last_report: None,
            applied: Vec::new(),
            targets: Vec::new(),
            telemetry: Telemetry::default(),
            folder: None,
            preset: None,
        }
    }

    fn done() -> GnOutcome {
        outcome(RunState::Done, StopReason::Accepted)
    }

    fn cancelled() -> GnOutcome {
        outcome(RunState::Cancelled, StopReason::Cancelled)
    }

    /// viga-gn's Blender-side library answering every call with `value`.
    fn library_answers(blender: &FakeBlender, value: serde_json::Value) {
        let stdout = format!("VIGA_GN_RESULT {}\n", json!({"ok": true, "value": value}));
        let ran = ExecutionResult {
            stdout,
            ..ExecutionResult::default()
        };
        blender.answer("execute", serde_json::to_value(ran).unwrap());
    }

    fn undo_pushes(blender: &FakeBlender) -> Vec<String> {
        blender
            .calls()
            .into_iter()
            .filter_map(|call| match call {
                BridgeCommand::UndoPush { message } => Some(message),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn a_live_run_is_one_undo_step_when_done_and_taken_back_otherwise() {
        let user = Arc::new(FakeBlender::new());
        let workbench = Workbench::live(user.clone());
        assert!(workbench.is_attached());
        let finished = workbench.finish(&done(), "scatter cubes").await.unwrap();
        assert_eq!(finished.stop, StopReason::Accepted);
        assert_eq!(undo_pushes(&user), ["viga: scatter cubes"]);
        assert_eq!(user.count("undo"), 0);

        let finished = workbench
            .finish(&cancelled(), "scatter cubes")
            .await
            .unwrap();
        assert_eq!(finished.stop, StopReason::Cancelled);
        assert_eq!(
            undo_pushes(&user),
            ["viga: scatter cubes", "viga: scatter cubes (discarded)"]
        );
        assert_eq!(user.names().last(), Some(&"undo"));
    }

    #[tokio::test]
    async fn a_run_in_vigas_own_blender_leaves_nothing_to_settle() {
        let worker = Arc::new(FakeBlender::new());
        let workbench = Workbench::own(worker.clone());
        assert!(!workbench.is_attached());
        let finished = workbench.finish(&done(), "scatter cubes").await.unwrap();
        assert_eq!(
            finished,
            Finished {
                stop: StopReason::Accepted,
                imported: None
            }
        );
        assert!(worker.calls().is_empty());
    }

    /// On a copy, the person's scene is touched only to save the copy, and a done run whose
    /// result cannot come back is a failed run, with the scene as it was.
    #[tokio::test]
    async fn on_a_copy_a_done_run_whose_result_cannot_come_back_fails() {
        let user = Arc::new(FakeBlender::new());
        let worker = Arc::new(FakeBlender::new());
        // The node groups' fingerprints when the copy opens: none.
        library_answers(&worker, json!({}));
        let workbench = Workbench::copy_of(user.clone(), worker.clone())
            .await
            .unwrap();
        assert_eq!(user.names(), ["save_blend"]);

        let finished = workbench.finish(&cancelled(), "scatter").await.unwrap();
        assert_eq!(finished.stop, StopReason::Cancelled);

        // What the run made: nothing, but it saved no scene to bring that from.
        library_answers(&worker, json!({"node_groups": [], "modifiers": []}));
        let finished = workbench.finish(&done(), "scatter").await.unwrap();
        let StopReason::Failed { message, kind } = &finished.stop else {
            panic!("a done run whose result cannot come back fails: {finished:?}");
        };
        assert_eq!(*kind, FailureKind::Other);
        assert!(message.contains("was not saved"), "{message}");
        assert_eq!(finished.imported, None);
        assert_eq!(user.names(), ["save_blend"], "the scene was not touched");
    }
}
