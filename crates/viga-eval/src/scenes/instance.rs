//! One instance from goal to scores: the goal rendered (and checked for an answer leak),
//! the proposal asked for and scored, the start program and the oracle-selected proposal
//! scored where the figures need them, the judge asked, and `scores.json` written.

use std::path::Path;
use std::sync::Arc;

use viga_blender::BlenderTransport;

use crate::benchmark::{Attempt, Proposal};
#[cfg(feature = "clip")]
use crate::clip::ClipBackend;
use crate::judge::{Judge, Judgement};
use crate::layout::{Instance, Suite};
use crate::leak;
#[cfg(not(feature = "clip"))]
use crate::no_clip::ClipBackend;
use crate::scene;
use crate::scores::{
    EvalSettings, InstanceScores, N_CLIP_NOT_EXECUTABLE, N_CLIP_UNAVAILABLE, OracleSelected,
    StartProgram,
};
use crate::{EvalError, write_atomic};

use super::scoring::index_off_the_runtime;
use super::{EvalConfig, Goal, ProgramScores, SceneBenchmark, Scorer, harness, write_pngs};

async fn render_goal(
    config: &EvalConfig,
    instance: &Instance,
    blender: &dyn BlenderTransport,
    dir: &Path,
) -> Result<Goal, EvalError> {
    let code = std::fs::read_to_string(&instance.goal_py)
        .map_err(|err| EvalError::io(&instance.goal_py, err))?;
    let ran = scene::run_program(blender, instance, &code, config.timeout).await?;
    if let Some(error) = ran.error {
        return Err(harness(
            instance,
            format!("goal.py fails in this Blender ({error}); the instance cannot be scored"),
        ));
    }
    let cameras = scene::camera_objects(blender, config.timeout)
        .await
        .map_err(|err| harness(instance, format!("the scene's cameras: {err}")))?;
    scene::check_views(instance, &cameras).map_err(|message| harness(instance, message))?;
    let camera_poses = if instance.task.suite() == Suite::BlenderBench {
        Some(
            scene::camera_poses(blender, None, config.timeout)
                .await
                .map_err(|err| harness(instance, format!("the goal's camera poses: {err}")))?,
        )
    } else {
        None
    };
    let renders = scene::render_views(blender, instance, config.render, config.timeout)
        .await
        .map_err(|err| harness(instance, format!("the goal cannot be rendered: {err}")))?;
    let paths = write_pngs(&dir.join("goal"), &renders)?;
    let surface = if instance.task.has_chamfer() {
        let surface = scene::surface(blender, config.timeout)
            .await
            .map_err(|err| harness(instance, format!("goal surface: {err}")))?;
        Some(Arc::new(index_off_the_runtime(instance, surface).await?))
    } else {
        None
    };
    Ok(Goal {
        answer_leak: None,
        renders,
        paths,
        surface,
        camera_poses,
    })
}

/// The instance's goal, rendered, and on BlenderBench its base scene checked for a leaked
/// answer.
pub(super) async fn prepare(
    config: &EvalConfig,
    instance: &Instance,
    blender: &dyn BlenderTransport,
    dir: &Path,
) -> Result<Goal, EvalError> {
    let mut goal = render_goal(config, instance, blender, dir).await?;
    if let Some(poses) = &goal.camera_poses {
        goal.answer_leak = Some(
            leak::check(blender, instance, poses, config.timeout)
                .await
                .map_err(|err| harness(instance, format!("the answer-leakage check: {err}")))?,
        );
    }
    Ok(goal)
}

/// The proposal's scores against the goal, and start.py's and the oracle-selected
/// program's where the figures need them, and the judge's rating.
pub(super) async fn score(
    config: &EvalConfig,
    settings: &EvalSettings,
    clip: Option<Arc<ClipBackend>>,
    attempt: Attempt<'_, SceneBenchmark>,
) -> Result<InstanceScores, EvalError> {
    let Attempt {
        instance,
        target: goal,
        proposal,
        worker: blender,
        dir,
        started,
        ..
    } = attempt;
    let scorer = Scorer {
        config,
        instance,
        blender: blender.as_ref(),
        goal: &goal,
        clip: clip.clone(),
    };
    let dir = dir.to_path_buf();
    let headline = match &proposal.code {
        None => ProgramScores {
            error: Some("the system proposed no program".to_owned()),
            ..ProgramScores::default()
        },
        Some(code) => {
            write_atomic(&dir.join("proposal.py"), code.as_bytes())?;
            scorer.score(code, &dir.join("proposal")).await?
        }
    };
    // The all-instances figure counts start.py where the proposal is not executable.
    let start_program = score_start_program(&scorer, &proposal, &headline, &dir).await?;
    let oracle_selected = if settings.oracle_selected {
        Some(
            select_with_ground_truth(&scorer, &proposal, &headline, start_program.as_ref(), &dir)
                .await?,
        )
    } else {
        None
    };
    let judge = match &config.judge {
        Some(judge) => Some(judge_proposal(judge, instance, &goal, &headline, &dir).await?),
        None => None,
    };
    let n_clip_note = n_clip_note(clip.is_some(), &headline);
    let scores = InstanceScores {
        instance: instance.name.clone(),
        task: instance.task,
        settings: settings.clone(),
        executable: headline.error.is_none(),
        error: headline.error,
        cameras: instance.cameras().collect(),
        views: headline.views,
        pl: headline.pl,
        n_clip: headline.n_clip,
        n_clip_note,
        cd: headline.cd,
        cd_note: headline.cd_note,
        proposal_note: proposal.note,
        oracle_selected,
        start_program: start_program.map(|start| StartProgram {
            executable: start.error.is_none(),
            error: start.error,
            pl: start.pl,
            n_clip: start.n_clip,
            cd: start.cd,
        }),
        answer_leak: goal.answer_leak.clone(),
        judge,
        seconds: started.elapsed().as_secs_f64(),
    };
    Ok(scores)
}

/// The start program's scores, needed when the proposal is not executable: the
/// all-instances figure counts start.py there. A proposal that is start.py is not run again.
async fn score_start_program(
    scorer: &Scorer<'_>,
    proposal: &Proposal,
    headline: &ProgramScores,
    dir: &Path,
) -> Result<Option<ProgramScores>, EvalError> {
    if headline.error.is_none() {
        return Ok(None);
    }
    let start = read_start(scorer.instance)?;
    Ok(Some(if proposal.code.as_deref() == Some(start.as_str()) {
        headline.clone()
    } else {
        scorer.score(&start, &dir.join("start")).await?
    }))
}

/// What the N-CLIP figure of an instance is: unavailable without CLIP, missing when the
/// proposal did not render, else how it was measured.
fn n_clip_note(has_clip: bool, headline: &ProgramScores) -> String {
    match (has_clip, headline.n_clip) {
        (false, _) => N_CLIP_UNAVAILABLE.to_owned(),
        (true, None) => N_CLIP_NOT_EXECUTABLE.to_owned(),
        (true, Some(_)) => format!(
            "CLIP ViT-B/32 (the weights in settings.clip_weights), mean over {} views",
            headline.views.len()
        ),
    }
}

/// The judge's ratings of the headline proposal's Camera1 render, against the picture of the
/// goal the agent is shown (the instance's visual prompt, else the goal's Camera1 render).
async fn judge_proposal(
    judge: &Judge,
    instance: &Instance,
    goal: &Goal,
    headline: &ProgramScores,
    dir: &Path,
) -> Result<Judgement, EvalError> {
    if let Some(error) = &headline.error {
        return Ok(Judgement::NotJudged {
            reason: format!("the proposal is not executable ({error})"),
        });
    }
    let reference =
        match &instance.visual_prompt {
            Some(path) => std::fs::read(path).map_err(|err| EvalError::io(path, err))?,
            None => goal.renders.first().cloned().ok_or_else(|| {
                harness(instance, "the goal has no Camera1 render to judge against")
            })?,
        };
    let render_path = dir.join("proposal").join("render1.png");
    let render = std::fs::read(&render_path).map_err(|err| EvalError::io(&render_path, err))?;
    Ok(judge.judge(instance, reference, render).await)
}

fn read_start(instance: &Instance) -> Result<String, EvalError> {
    std::fs::read_to_string(&instance.start_py)
        .map_err(|err| EvalError::io(&instance.start_py, err))
}

/// The oracle-selected figure: every distinct program of the proposal (the headline, the
/// start program, the system's intermediate programs) scored, and the lowest mean PL chosen.
/// `start_scores` is start.py's result when it was already scored (for the all-instances
/// figure), so it is not run twice.
async fn select_with_ground_truth(
    scorer: &Scorer<'_>,
    proposal: &Proposal,
    headline: &ProgramScores,
    start_scores: Option<&ProgramScores>,
    dir: &Path,
) -> Result<OracleSelected, EvalError> {
    let start = read_start(scorer.instance)?;
    let mut others: Vec<(String, &str)> = vec![("start.py".to_owned(), start.as_str())];
    others.extend(
        proposal
            .candidates
            .iter()
            .enumerate()
            .map(|(k, code)| (format!("candidate {}", k + 1), code.as_str())),
    );
    // Identical programs score identically: each distinct text is scored once.
    let mut scored: Vec<(String, &str, OracleSelected)> = Vec::new();
    let figures = |scores: &ProgramScores| OracleSelected {
        chosen: String::new(),
        programs: 0,
        executable: 0,
        pl: scores.pl,
        n_clip: scores.n_clip,
        cd: scores.cd,
    };
    if let Some(code) = &proposal.code {
        scored.push(("final".to_owned(), code.as_str(), figures(headline)));
    }
    for (label, code) in others {
        if scored.iter().any(|(_, seen, _)| *seen == code) {
            continue;
        }
        if let (Some(known), true) = (start_scores, label == "start.py") {
            scored.push((label, code, figures(known)));
            continue;
        }
        let folder = dir.join("candidates").join(label.replace(' ', "-"));
        let scores = scorer.score(code, &folder).await?;
        scored.push((label, code, figures(&scores)));
    }
    let programs = scored.len();
    let executable = scored.iter().filter(|(.., f)| f.pl.is_some()).count();
    let best = scored
        .into_iter()
        .filter_map(|(label, _, f)| f.pl.map(|pl| (label, pl, f)))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    Ok(match best {
        Some((chosen, _, best)) => OracleSelected {
            chosen,
            programs,
            executable,
            ..best
        },
        None => OracleSelected {
            chosen: "none executable".to_owned(),
            programs,
            executable,
            pl: None,
            n_clip: None,
            cd: None,
        },
    })
}
