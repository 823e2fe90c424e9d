//! Runs on a person's open scene (viga attached to their Blender through the add-on).
//!
//! Their scene is never the workbench: [`snapshot_user_scene`] saves a copy of it into the
//! run folder (`base.blend`; their file, its path and their unsaved state are untouched) and
//! the run's own worker, started after it, starts every iteration from that copy
//! ([`start_on_snapshot`]). Only when the run is over, and only when they want it, does its
//! result reach their scene, as one undo step, and as data: [`ChosenResult::make`] has viga's
//! own (contained) worker run the chosen program on the copy again, compare fingerprints of
//! the scene before and after it and save the scene it left, and [`import_result`] has their
//! Blender take that in through the bridge's fixed `import_scene_result` command, which runs
//! no program ([`apply_to_user_scene`] does both). Running the program in their Blender
//! itself is trusted mode ([`ChosenResult::run_in`]), which the front ends confirm for each
//! apply. Nothing here saves or opens their .blend.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use viga_blender::{BlenderCommands as _, BlenderTransport, PACK_RESULT_ASSETS};
use viga_protocol::bridge::{
    AppliedProgram, BridgeCommand, BroughtObject, SceneFingerprints, SceneLink,
    SceneResultImported, SceneResultPlan,
};
use viga_provider::Provider;

use super::{SceneDomain, SceneSettings, blender_error, resumable_scene, save_scene_as};
use viga_core::RunConfig;
use viga_core::folder::{BASE_SNAPSHOT, FINAL_PROGRAM, RunFolder, program_extension};
use viga_core::{CoreError, RunHandle, check_problems, start_in};

/// The longest task text an undo step's name carries.
const UNDO_NAME_CHARS: usize = 60;
/// The folder of a run folder the scenes made for applying go in (`scenes/final.blend`,
/// `scenes/<n>.blend`).
const RESULT_SCENES_DIR: &str = "scenes";
/// The longest datablock name Blender keeps, in bytes.
const MAX_NAME_BYTES: usize = 255;
/// The most objects, or datablocks of one kind, a fingerprint may list.
const MAX_FINGERPRINTED: usize = 100_000;
/// The most collections an object may be in.
const MAX_OBJECT_COLLECTIONS: usize = 64;

/// A new run on a person's open scene: its folder, made, with the copy of their scene in
/// it, ready to start once its worker is ([`start_on_snapshot`]). Made before the worker
/// starts, so a contained worker can be allowed to read the copy and nothing else of the
/// output folder.
#[derive(Debug)]
pub struct UserSceneSnapshot {
    folder: RunFolder,
    config: RunConfig,
    scene: SceneSettings,
}

impl UserSceneSnapshot {
    /// The run's settings.
    pub fn config(&self) -> &RunConfig {
        &self.config
    }

    /// The scene's settings, with the copy as its base scene.
    pub fn scene(&self) -> &SceneSettings {
        &self.scene
    }

    /// The run folder.
    pub fn folder(&self) -> &Path {
        self.folder.root()
    }

    /// What of the run folder its worker may read ([`RunFolder::worker_inputs`]).
    pub fn worker_inputs(&self) -> Result<viga_core::folder::WorkerInputs, CoreError> {
        self.folder.worker_inputs(crate::OWN_INPUTS)
    }
}

/// Makes the run folder of a run on the open scene of `user` (a person's Blender) and
/// saves a copy of that scene in it; `scene`'s base scene must be unset (the copy is it).
pub async fn snapshot_user_scene(
    config: RunConfig,
    mut scene: SceneSettings,
    user: &dyn BlenderTransport,
    output_root: &Path,
) -> Result<UserSceneSnapshot, CoreError> {
    if let Some(base) = &scene.base_blend {
        return Err(CoreError::Config(format!(
            "an attached run starts from the open scene in Blender; drop the base scene {} or run without --attach",
            base.display()
        )));
    }
    let mut problems = config.problems();
    problems.extend(scene.problems(config.generator_tools));
    check_problems(problems)?;
    let folder = RunFolder::create(output_root, &config)?;
    let snapshot = std::path::absolute(folder.root().join(BASE_SNAPSHOT))
        .map_err(|err| CoreError::io(folder.root().join(BASE_SNAPSHOT), err))?;
    user.save_blend(&snapshot.to_string_lossy())
        .await
        .map_err(|err| {
            blender_error(
                format!(
                    "Blender could not save a copy of the open scene to {}",
                    snapshot.display()
                ),
                err,
            )
        })?;
    scene.base_blend = Some(snapshot);
    Ok(UserSceneSnapshot {
        folder,
        config,
        scene,
    })
}

/// Starts the run whose base scene is the copy in `snapshot`. Its programs, renders and
/// verification all happen in `worker`; the person's Blender is not held.
pub fn start_on_snapshot(
    snapshot: UserSceneSnapshot,
    provider: Arc<dyn Provider>,
    worker: Arc<dyn BlenderTransport>,
) -> Result<RunHandle, CoreError> {
    let UserSceneSnapshot {
        folder,
        config,
        scene,
    } = snapshot;
    let has_target = !config.targets.is_empty();
    let domain = SceneDomain::new(scene, worker, has_target)?
        .with_model(Arc::clone(&provider), config.prompts_dir.as_deref())?;
    start_in(folder, config, provider, Arc::new(domain))
}

/// Which program of a run to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResultChoice {
    /// The run's result (`final.py`, its last program that ran well).
    #[default]
    Final,
    /// The program of this iteration (`codes/<n>.py`).
    Iteration(u32),
}

impl ResultChoice {
    /// The iteration `n`, or the final result when `None`.
    pub fn from_iteration(iteration: Option<u32>) -> Self {
        iteration.map_or(Self::Final, Self::Iteration)
    }

    fn describe(self) -> String {
        match self {
            Self::Final => "the run's result".to_owned(),
            Self::Iteration(index) => format!("iteration {index}'s program"),
        }
    }

    /// The file name its scene is saved under in [`RESULT_SCENES_DIR`].
    fn scene_file(self) -> String {
        match self {
            Self::Final => "final.blend".to_owned(),
            Self::Iteration(index) => format!("{index}.blend"),
        }
    }
}

/// A scene run's program, chosen to be applied to a person's scene.
#[derive(Debug)]
pub struct ChosenResult {
    folder: RunFolder,
    config: RunConfig,
    scene: SceneSettings,
    choice: ResultChoice,
    code: String,
    from_open_scene: bool,
}

impl ChosenResult {
    /// The program `choice` of the scene run in `run_folder`; says what is missing when the
    /// folder has no such program.
    pub fn open(run_folder: &Path, choice: ResultChoice) -> Result<Self, CoreError> {
        let folder = RunFolder::open(run_folder)?;
        if super::addon_agent::is_agent_run(run_folder) {
            return Err(CoreError::Config(format!(
                "{} is an add-on agent run; only a scene run's result can be applied to a Blender scene",
                run_folder.display()
            )));
        }
        let (config, mut scene) = resumable_scene(run_folder).map_err(|err| match err {
            CoreError::Config(message) => CoreError::Config(format!(
                "{message}; only a scene run's result can be applied to a Blender scene"
            )),
            other => other,
        })?;
        let path = match choice {
            ResultChoice::Final => folder.final_program_path(),
            ResultChoice::Iteration(index) => folder
                .root()
                .join(format!("codes/{index}.{}", program_extension("python"))),
        };
        if !path.is_file() {
            return Err(CoreError::Config(missing_program(&folder, choice)));
        }
        let code = std::fs::read_to_string(&path).map_err(|err| CoreError::io(&path, err))?;
        // An attached run's base scene is the copy of the person's scene in its folder,
        // wherever the folder is now.
        let snapshot = folder.root().join(BASE_SNAPSHOT);
        let from_open_scene = snapshot.is_file();
        if from_open_scene {
            scene.base_blend =
                Some(std::path::absolute(&snapshot).map_err(|err| CoreError::io(&snapshot, err))?);
        }
        Ok(Self {
            folder,
            config,
            scene,
            choice,
            code,
            from_open_scene,
        })
    }

    /// The run's scene settings, with its base scene where it is now (an attached run's
    /// copy of the person's scene, in the run folder): what the worker that makes the result
    /// reads ([`SceneSettings::prepare_blender_reads`]).
    pub fn scene(&self) -> &SceneSettings {
        &self.scene
    }

    /// The folders of the run folder the worker that makes the result reads
    /// ([`RunFolder::worker_inputs`]).
    pub fn worker_inputs(&self) -> Result<viga_core::folder::WorkerInputs, CoreError> {
        self.folder.worker_inputs(crate::OWN_INPUTS)
    }

    /// The undo step the result becomes: `viga: <task>`, and the iteration when it is not
    /// the final result.
    pub fn undo_name(&self) -> String {
        match self.choice {
            ResultChoice::Final => undo_name(&self.config.task),
            ResultChoice::Iteration(index) => {
                format!("{} (iteration {index})", undo_name(&self.config.task))
            }
        }
    }

    /// Makes the result in `worker` (viga's own, contained): runs the program on the run's
    /// base scene (for an attached run, the copy of the person's scene), compares the
    /// scene's fingerprints before and after it, and saves the scene it left as
    /// `scenes/<final|n>.blend` in the run folder. Nothing of it runs anywhere else.
    pub async fn make(&self, worker: &dyn BlenderTransport) -> Result<PreparedResult, CoreError> {
        let reset = self.scene.base_scene();
        let opened = worker
            .execute("", Some(reset.clone()), None)
            .await
            .map_err(|err| blender_error("Blender could not open the run's base scene", err))?;
        if let Some(error) = opened.error {
            return Err(CoreError::Config(format!(
                "the run's base scene cannot be opened: {}",
                error.message
            )));
        }
        let before = fingerprint_scene(worker).await?;
        let ran = worker
            .execute(&self.code, Some(reset), Some(self.config.program_timeout))
            .await
            .map_err(|err| {
                blender_error(
                    format!("Blender could not run {}", self.choice.describe()),
                    err,
                )
            })?;
        if let Some(error) = ran.error {
            return Err(CoreError::Config(format!(
                "{} fails on the run's base scene ({error}), so there is no result to apply; choose another iteration",
                self.choice.describe(),
            )));
        }
        let after = fingerprint_scene(worker).await?;
        // The run's own images and fonts are packed into the result (the person's Blender
        // reads no file a result names), and other paths made absolute, so a scene saved in
        // the worker's scratch folder and moved into the run folder still names its files.
        let packed = worker
            .execute(PACK_RESULT_ASSETS, None, None)
            .await
            .map_err(|err| blender_error("Blender could not pack the result's own files", err))?;
        if let Some(error) = packed.error {
            return Err(CoreError::Config(format!(
                "the result's own images and fonts could not be packed: {}",
                error.message
            )));
        }
        let blend = std::path::absolute(
            self.folder
                .root()
                .join(RESULT_SCENES_DIR)
                .join(self.choice.scene_file()),
        )
        .map_err(|err| CoreError::io(self.folder.root(), err))?;
        save_scene_as(worker, &blend)
            .await
            .map_err(|err| CoreError::worker("the result's scene could not be saved", err))?;
        Ok(PreparedResult {
            blend,
            plan: plan_result(&before, &after, self.from_open_scene),
        })
    }

    /// Trusted mode: runs the program in `user` (a person's Blender) itself, as one undo
    /// step; a program that fails there is undone at once, and the reply says so. The
    /// program runs as the person, uncontained: front ends confirm it for each apply.
    pub async fn run_in(&self, user: &dyn BlenderTransport) -> Result<AppliedProgram, CoreError> {
        user.apply_program(&self.code, &self.undo_name(), None)
            .await
            .map_err(|err| blender_error("Blender could not apply the result", err))
    }
}

/// Why `choice` of `folder` cannot be applied, and what can be.
fn missing_program(folder: &RunFolder, choice: ResultChoice) -> String {
    let ran = iterations_with_programs(folder.root());
    let which = if ran.is_empty() {
        "no iteration left a program".to_owned()
    } else {
        format!(
            "iterations with a program: {}",
            ran.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    match choice {
        ResultChoice::Final => format!(
            "{} has no {FINAL_PROGRAM}: the run produced no program that ran, so there is no result to apply ({which})",
            folder.root().display()
        ),
        ResultChoice::Iteration(index) => format!(
            "{} has no program of iteration {index} ({which})",
            folder.root().display()
        ),
    }
}

/// The iterations of the run in `root` that kept a program, in order.
fn iterations_with_programs(root: &Path) -> Vec<u32> {
    let extension = program_extension("python");
    let mut found: Vec<u32> = std::fs::read_dir(root.join("codes"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name();
            let stem = name.to_str()?.strip_suffix(&format!(".{extension}"))?;
            stem.parse().ok()
        })
        .collect();
    found.sort_unstable();
    found
}

/// Fingerprints of the scene open in `worker` (viga's own), checked for shape and size:
/// compared before and after a program, they say what it changed ([`plan_result`]).
pub async fn fingerprint_scene(
    worker: &dyn BlenderTransport,
) -> Result<SceneFingerprints, CoreError> {
    let reply = worker
        .call(BridgeCommand::SceneFingerprints, None)
        .await
        .map_err(|err| blender_error("Blender could not fingerprint the scene", err))?;
    let fingerprints: SceneFingerprints = serde_json::from_value(reply).map_err(|err| {
        CoreError::Config(format!(
            "the worker's scene fingerprints are not readable: {err}"
        ))
    })?;
    check_fingerprints(&fingerprints).map_err(|problem| {
        CoreError::Config(format!(
            "the worker's scene fingerprints are refused: {problem}"
        ))
    })?;
    Ok(fingerprints)
}

/// A scene result made in viga's worker, ready to come into a person's scene.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedResult {
    /// The scene the program left, saved by the worker (`scenes/<final|n>.blend`).
    pub blend: PathBuf,
    /// What to take from it.
    pub plan: SceneResultPlan,
}

/// Brings `prepared` into the open scene of `user` (a person's Blender) as one undo step
/// named `undo_name`, through the bridge's `import_scene_result`: no program runs there,
/// and a result the bridge refuses leaves the scene as it was.
pub async fn import_result(
    user: &dyn BlenderTransport,
    prepared: &PreparedResult,
    undo_name: &str,
) -> Result<SceneResultImported, CoreError> {
    let command = BridgeCommand::ImportSceneResult {
        path: prepared.blend.to_string_lossy().into_owned(),
        plan: prepared.plan.clone(),
        message: undo_name.to_owned(),
    };
    let reply = user
        .call(command, None)
        .await
        .map_err(|err| blender_error("Blender did not take the result in", err))?;
    serde_json::from_value(reply).map_err(|err| {
        CoreError::Config(format!(
            "Blender's answer to import_scene_result is not readable: {err}"
        ))
    })
}

/// Applies `result` to the open scene of `user` (a person's Blender) as one undo step, as
/// data: made in `worker` ([`ChosenResult::make`]), then brought in ([`import_result`]).
pub async fn apply_to_user_scene(
    result: &ChosenResult,
    worker: &dyn BlenderTransport,
    user: &dyn BlenderTransport,
) -> Result<SceneResultImported, CoreError> {
    let prepared = result.make(worker).await?;
    import_result(user, &prepared, &result.undo_name()).await
}

/// What a result must bring to make a scene whose fingerprints were `before` look as one
/// whose fingerprints are `after`. `from_open_scene`: `before` is a copy of the scene the
/// result goes into, so what did not change is that scene's own; otherwise the result only
/// adds (nothing of that scene is replaced or removed).
pub fn plan_result(
    before: &SceneFingerprints,
    after: &SceneFingerprints,
    from_open_scene: bool,
) -> SceneResultPlan {
    let objects: Vec<BroughtObject> = after
        .objects
        .iter()
        .filter(|(name, object)| before.objects.get(*name) != Some(object))
        .map(|(name, object)| BroughtObject {
            name: name.clone(),
            replaces: from_open_scene && before.objects.contains_key(name),
            collections: object.collections.clone(),
        })
        .collect();
    let remove = if from_open_scene {
        before
            .objects
            .keys()
            .filter(|name| !after.objects.contains_key(*name))
            .cloned()
            .collect()
    } else {
        Vec::new()
    };
    let mut changed: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut added: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (kind, blocks) in &after.data {
        let earlier = before.data.get(kind);
        for (name, digest) in blocks {
            let target = match earlier.and_then(|earlier| earlier.get(name)) {
                Some(was) if was == digest => continue,
                Some(_) if from_open_scene => &mut changed,
                _ => &mut added,
            };
            target.entry(kind.clone()).or_default().push(name.clone());
        }
    }
    let brought: BTreeSet<&str> = objects.iter().map(|object| object.name.as_str()).collect();
    let camera = scene_link(
        before.camera.as_deref(),
        after.camera.as_deref(),
        from_open_scene,
        |name| brought.contains(name),
    );
    let worlds = |map: &BTreeMap<String, Vec<String>>, name: &str| {
        map.get("worlds")
            .is_some_and(|names| names.iter().any(|world| world == name))
    };
    let world = scene_link(
        before.world.as_deref(),
        after.world.as_deref(),
        from_open_scene,
        |name| worlds(&changed, name) || worlds(&added, name),
    );
    SceneResultPlan {
        from_open_scene,
        objects,
        remove,
        changed,
        added,
        collections: after.collections.clone(),
        camera,
        world,
    }
}

/// What a result does with the scene's camera or world, `before` and `after` the program.
/// Into a scene the run did not start from, only what the result brings is set, and
/// nothing is cleared.
fn scene_link(
    before: Option<&str>,
    after: Option<&str>,
    from_open_scene: bool,
    brought: impl Fn(&str) -> bool,
) -> SceneLink {
    match after {
        Some(name) if from_open_scene && before != Some(name) => SceneLink::Use(name.to_owned()),
        Some(name) if !from_open_scene && brought(name) => SceneLink::Use(name.to_owned()),
        None if from_open_scene && before.is_some() => SceneLink::Clear,
        _ => SceneLink::Keep,
    }
}

/// Why fingerprints a worker reported are not ones to plan from: what they name and how
/// much. (The worker ran model code; the bridge checks everything again.)
fn check_fingerprints(fingerprints: &SceneFingerprints) -> Result<(), String> {
    if fingerprints.objects.len() > MAX_FINGERPRINTED
        || fingerprints.collections.len() > MAX_FINGERPRINTED
        || fingerprints.data.len() > 64
        || fingerprints
            .data
            .values()
            .any(|blocks| blocks.len() > MAX_FINGERPRINTED)
    {
        return Err(format!(
            "they list more than {MAX_FINGERPRINTED} datablocks of a kind"
        ));
    }
    let names = fingerprints
        .objects
        .keys()
        .chain(fingerprints.camera.iter())
        .chain(fingerprints.world.iter())
        .chain(fingerprints.data.values().flat_map(BTreeMap::keys));
    for name in names {
        check_name(name)?;
    }
    for (name, parent) in &fingerprints.collections {
        check_name(name)?;
        if !parent.is_empty() {
            check_name(parent)?;
        }
    }
    for (name, object) in &fingerprints.objects {
        if object.collections.is_empty() || object.collections.len() > MAX_OBJECT_COLLECTIONS {
            return Err(format!(
                "object {name:?} is in {} collections; it must be in 1 to {MAX_OBJECT_COLLECTIONS}",
                object.collections.len()
            ));
        }
        for collection in object.collections.iter().filter(|c| !c.is_empty()) {
            check_name(collection)?;
        }
    }
    Ok(())
}

fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES || name.contains('\0') {
        return Err(format!(
            "a name must have 1 to {MAX_NAME_BYTES} bytes and no NUL, not {name:?}"
        ));
    }
    Ok(())
}

/// `viga: <task>`, cut to a length Blender's undo history shows whole.
pub fn undo_name(task: &str) -> String {
    let mut name: String = task.chars().take(UNDO_NAME_CHARS).collect();
    if task.chars().count() > UNDO_NAME_CHARS {
        name.push('…');
    }
    format!("viga: {name}")
}

#[cfg(test)]
mod tests {
    use viga_protocol::bridge::ObjectFingerprint;

    use super::*;

    #[test]
    fn undo_names_are_short() {
        assert_eq!(undo_name("a red crate"), "viga: a red crate");
        let long = "x".repeat(200);
        assert_eq!(undo_name(&long).chars().count(), "viga: ".len() + 61);
    }

    fn object(fingerprint: &str, collections: &[&str]) -> ObjectFingerprint {
        ObjectFingerprint {
            fingerprint: fingerprint.to_owned(),
            collections: collections.iter().map(|c| (*c).to_owned()).collect(),
        }
    }

    fn scene(
        objects: &[(&str, ObjectFingerprint)],
        data: &[(&str, &str, &str)],
        camera: Option<&str>,
    ) -> SceneFingerprints {
        let mut fingerprints = SceneFingerprints {
            scene: "Scene".into(),
            camera: camera.map(str::to_owned),
            objects: objects
                .iter()
                .map(|(name, object)| ((*name).to_owned(), object.clone()))
                .collect(),
            ..SceneFingerprints::default()
        };
        for (kind, name, digest) in data {
            fingerprints
                .data
                .entry((*kind).to_owned())
                .or_default()
                .insert((*name).to_owned(), (*digest).to_owned());
        }
        fingerprints
    }

    fn base() -> SceneFingerprints {
        scene(
            &[
                ("Plane", object("p", &[""])),
                ("UserCube", object("u", &["Props"])),
                ("Cam", object("c", &[""])),
            ],
            &[("materials", "Shared", "s"), ("meshes", "Plane", "pm")],
            Some("Cam"),
        )
    }

    fn result() -> SceneFingerprints {
        scene(
            &[
                ("Plane", object("p2", &[""])),
                ("Cam", object("c", &[""])),
                ("Crate", object("k", &["Props"])),
                ("Cam2", object("c2", &[""])),
            ],
            &[
                ("materials", "Shared", "s2"),
                ("materials", "Red", "r"),
                ("meshes", "Plane", "pm"),
            ],
            Some("Cam2"),
        )
    }

    #[test]
    fn a_plan_for_the_scene_the_run_started_from_replaces_removes_and_adds() {
        let plan = plan_result(&base(), &result(), true);
        let names: Vec<(&str, bool)> = plan
            .objects
            .iter()
            .map(|o| (o.name.as_str(), o.replaces))
            .collect();
        assert_eq!(names, [("Cam2", false), ("Crate", false), ("Plane", true)]);
        assert_eq!(plan.remove, ["UserCube"]);
        assert_eq!(
            plan.changed,
            BTreeMap::from([("materials".into(), vec!["Shared".into()])])
        );
        assert_eq!(
            plan.added,
            BTreeMap::from([("materials".into(), vec!["Red".into()])])
        );
        assert_eq!(plan.camera, SceneLink::Use("Cam2".into()));
        assert_eq!(plan.world, SceneLink::Keep);
        // A camera removed in the run's scene is removed in the person's.
        let mut without = result();
        without.camera = None;
        assert_eq!(
            plan_result(&base(), &without, true).camera,
            SceneLink::Clear
        );
        // A move into another collection is a change.
        let mut moved = base();
        moved
            .objects
            .insert("UserCube".into(), object("u", &["Other"]));
        let plan = plan_result(&base(), &moved, true);
        assert_eq!(plan.objects.len(), 1);
        assert_eq!(plan.objects[0].collections, ["Other"]);
    }

    #[test]
    fn a_plan_for_another_scene_only_adds() {
        let plan = plan_result(&base(), &result(), false);
        assert!(plan.objects.iter().all(|o| !o.replaces), "{plan:?}");
        assert!(plan.remove.is_empty() && plan.changed.is_empty());
        assert_eq!(
            plan.added,
            BTreeMap::from([("materials".into(), vec!["Red".into(), "Shared".into()])])
        );
        assert_eq!(plan.camera, SceneLink::Use("Cam2".into()));
        // A camera the result does not bring is not the person's to set.
        let mut same_camera = result();
        same_camera.camera = Some("Cam".into());
        assert_eq!(
            plan_result(&base(), &same_camera, false).camera,
            SceneLink::Keep
        );
    }

    #[test]
    fn an_unchanged_scene_plans_nothing() {
        let plan = plan_result(&base(), &base(), true);
        assert!(plan.objects.is_empty() && plan.remove.is_empty());
        assert!(plan.changed.is_empty() && plan.added.is_empty());
        assert_eq!(
            (plan.camera, plan.world),
            (SceneLink::Keep, SceneLink::Keep)
        );
    }

    #[test]
    fn fingerprints_with_bad_names_are_refused() {
        let mut bad = base();
        bad.objects.insert("a\0b".into(), object("x", &[""]));
        assert!(check_fingerprints(&bad).unwrap_err().contains("no NUL"));
        let mut homeless = base();
        homeless.objects.insert("Lost".into(), object("x", &[]));
        assert!(
            check_fingerprints(&homeless)
                .unwrap_err()
                .contains("0 collections")
        );
        assert_eq!(check_fingerprints(&result()), Ok(()));
    }
}
