//! Applying a reply's steps to Blender and checking the result with the verification gates;
//! how a failed step is told to the model.

use std::ops::ControlFlow::{self, Break, Continue};
use std::time::Instant;

use viga_protocol::event::RunEvent;
use viga_protocol::gn::{GateReport, GnStep};

use crate::gates::{Baseline, check_gates};

use super::{AppliedSteps, Ending, GnRun, RunState, Session, StepFailure};

impl GnRun {
    /// Runs steps in order until one fails; the steps after it do not run. A failure the
    /// model can repair ([`crate::GnError::is_step_failure`]) comes back in the result; any other
    /// ends the run, since the scene is then in an unknown state.
    pub(super) async fn apply(
        &self,
        round: u32,
        steps: &[GnStep],
        session: &mut Session,
    ) -> ControlFlow<Ending, AppliedSteps> {
        self.enter(RunState::Applying, round, session)?;
        let mut applied = AppliedSteps::default();
        for (position, step) in steps.iter().enumerate() {
            if session.recorder.link.is_cancelled() {
                return Break(Ending::Cancelled);
            }
            // Not cancellable once begun: the step finishes, so its record and the scene
            // agree.
            let index = session.recorder.step_started(round, step);
            let started = Instant::now();
            let result = self
                .registry
                .execute(&self.blender, &mut session.context, step)
                .await;
            let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
            match result {
                Ok(outcome) => {
                    let recorder = &mut session.recorder;
                    recorder.step_finished(index, latency_ms, Ok(&outcome.message));
                    applied.reports.push(format!(
                        "Step {:?} ran: {} {}",
                        step.id(),
                        outcome.message,
                        outcome.detail
                    ));
                    applied.ran.push(step.id().to_owned());
                    session.applied.push(step.clone());
                }
                Err(err) => {
                    let error = err.to_string();
                    session
                        .recorder
                        .step_finished(index, latency_ms, Err(&error));
                    let failure = StepFailure {
                        step_id: step.id().to_owned(),
                        action_type: step.action_type(),
                        error,
                        not_run: steps
                            .iter()
                            .skip(position + 1)
                            .map(|s| s.id().to_owned())
                            .collect(),
                    };
                    if !err.is_step_failure() {
                        return Break(Ending::Error(failure.summary(), err.kind()));
                    }
                    applied.failure = Some(failure);
                    break;
                }
            }
        }
        Continue(applied)
    }

    /// Checks the gates against the baseline, counts and announces the report; gates that
    /// are not required only warn.
    pub(super) async fn check(
        &self,
        round: u32,
        baseline: &Baseline,
        session: &mut Session,
    ) -> ControlFlow<Ending, GateReport> {
        self.enter(RunState::Verifying, round, session)?;
        let checked = check_gates(
            &self.blender,
            baseline,
            &session.context,
            &self.config.gates,
        )
        .await;
        let check = match checked {
            Ok(check) => check,
            Err(err) => return Break(Ending::failed("the gates could not run", &err)),
        };
        let counters = &mut session.recorder.telemetry.counters;
        if check.report.success {
            counters.gate_passes += 1;
        } else {
            counters.gate_failures += 1;
        }
        session.recorder.emit(RunEvent::GatesChecked {
            index: round,
            report: check.report.clone(),
        });
        for warning in &check.advisory {
            session
                .recorder
                .warn(format!("gate not required, failed: {warning}"));
        }
        session.last_report = Some(check.report.clone());
        Continue(check.report)
    }
}

impl StepFailure {
    /// One line for the run's error and log.
    pub(super) fn summary(&self) -> String {
        format!(
            "step {:?} ({}) failed: {}",
            self.step_id, self.action_type, self.error
        )
    }

    /// The failure as the model reads it: what failed and why, what its replies already
    /// put in the scene (this round and earlier ones), and what did not run.
    pub(super) fn for_model(&self, ran_this_round: &[String], earlier_rounds: &[String]) -> String {
        format!(
            "Step {:?} ({}) failed, so your reply was only partly applied:\n{}\n\
             Applied and kept in the scene: this round {}; earlier rounds {}.\n\
             Not run: {}.\n\
             Answer with the steps still needed. The applied ones stay; GN_OPS and NODE_TREE \
             steps are idempotent, so repeating one is harmless.",
            self.step_id,
            self.action_type,
            self.error,
            quoted_list(ran_this_round),
            quoted_list(earlier_rounds),
            quoted_list(&self.not_run),
        )
    }
}

/// `"a", "b"`, or `none`.
fn quoted_list(ids: &[String]) -> String {
    if ids.is_empty() {
        return "none".to_owned();
    }
    let quoted: Vec<String> = ids.iter().map(|id| format!("{id:?}")).collect();
    quoted.join(", ")
}
