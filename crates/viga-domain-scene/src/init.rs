//! Scene initialisation (`viga run --init URL`): before the first round, the target pictures
//! go to a reconstruction service ([`viga_skills::reconstruct`]), and the objects it sends
//! back (a mesh, a transform and a confidence each) are imported into the base scene in the
//! run's own (contained) Blender with Blender's importers. The result is the run's base scene,
//! `init/init.blend`, beside `init.json` (what the service answered, what was imported as
//! which Blender objects, what was refused and why) and the meshes as downloaded in `init/`,
//! which the contained Blender may read. The scene domain then tells the model which objects
//! it starts from and to edit them rather than replace them, and flags a result that has
//! deleted them all.
//!
//! The run does not start half-made: a service that is down or slow, or that sends nothing
//! usable, is an error, and the run folder (made before the worker started, so its Blender
//! could be allowed to read `init/`) is removed again.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use viga_blender::{BlenderCommands as _, BlenderTransport};
use viga_provider::Provider;
use viga_skills::assets::{ReferencePicture, python_string};
use viga_skills::meshfile::MeshFormat;
use viga_skills::reconstruct::{
    ReconstructedObject, ReconstructionService, RefusedObject, Transform,
};

use super::{INITIALISED_SOURCE, InitialisedObject, SceneDomain, SceneSettings, save_scene_as};
use viga_core::domain::TargetView;
use viga_core::folder::RunFolder;
use viga_core::{CoreError, RunConfig, RunHandle, check_problems, read_targets, start_in};

/// The run's base scene, initialised from the target pictures.
pub const INIT_BLEND: &str = "init/init.blend";
/// The record of the initialisation ([`InitRecord`]).
pub const INIT_RECORD: &str = "init.json";
/// The folder of the meshes as the service sent them (and of the scene made of them): one of
/// the run folder's [`viga_core::RunFolder::worker_inputs`], so a contained Blender reads them.
pub const INIT_MESHES: &str = "init";

/// The shortest time one object's import may take in Blender (a run's program timeout may
/// be shorter than a large mesh takes to read).
const MIN_IMPORT_TIME: Duration = Duration::from_secs(120);
/// What marks the line of an import's output that names the object it made.
const ROOT_MARKER: &str = "VIGA_INIT_ROOT ";

/// What `init.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InitRecord {
    /// The service's address.
    pub service: String,
    /// How long the service took, downloads included.
    pub service_seconds: f64,
    /// The scene the objects were imported into: the `--base` scene, or an empty one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<PathBuf>,
    pub objects: Vec<InitRecordObject>,
    /// Objects of the answer that were not imported, and why.
    pub refused: Vec<RefusedObject>,
    /// The service's answer as it came.
    pub answer: Value,
}

/// An object that was imported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InitRecordObject {
    /// Its name in the answer.
    pub name: String,
    /// Its name in the base scene (Blender renames a name already taken).
    pub scene_name: String,
    /// The mesh, relative to the run folder.
    pub mesh: PathBuf,
    pub format: MeshFormat,
    pub transform: Transform,
    pub confidence: f64,
}

/// Starts a run, in `folder` (made before `worker` started, so its Blender may read the
/// folder's `init/`), whose base scene is `scene`'s (an empty scene, or `--base`) with the
/// objects `service` reconstructs from the run's target pictures imported into it. When the
/// service cannot be asked, answers nothing usable, or nothing it sent can be imported, the
/// run folder is removed again and no run starts.
pub async fn start_initialised(
    folder: RunFolder,
    config: RunConfig,
    mut scene: SceneSettings,
    service: &ReconstructionService,
    provider: Arc<dyn Provider>,
    worker: Arc<dyn BlenderTransport>,
) -> Result<RunHandle, CoreError> {
    let root = folder.root().to_path_buf();
    let initialised = initialise(&folder, &config, &scene, service, worker.as_ref()).await;
    let record = match initialised {
        Ok(record) => record,
        Err(err) => {
            folder.discard();
            return Err(err);
        }
    };
    let base = std::path::absolute(root.join(INIT_BLEND))
        .map_err(|err| CoreError::io(root.join(INIT_BLEND), err))?;
    scene.base_blend = Some(base);
    scene.initialised = record
        .objects
        .iter()
        .map(|object| InitialisedObject {
            name: object.scene_name.clone(),
            confidence: object.confidence,
        })
        .collect();
    let domain = SceneDomain::new(scene, worker, true)?
        .with_model(Arc::clone(&provider), config.prompts_dir.as_deref())?;
    start_in(folder, config, provider, Arc::new(domain))
}

/// Checks the settings, asks the service and imports its objects into `folder`'s `init/`;
/// writes `init.json`.
async fn initialise(
    folder: &RunFolder,
    config: &RunConfig,
    scene: &SceneSettings,
    service: &ReconstructionService,
    worker: &dyn BlenderTransport,
) -> Result<InitRecord, CoreError> {
    if config.targets.is_empty() {
        return Err(CoreError::Config(
            "--init reconstructs the scene from the target pictures: give one with --target"
                .to_owned(),
        ));
    }
    let mut problems = config.problems();
    problems.extend(scene.problems(config.generator_tools));
    check_problems(problems)?;
    let files: Vec<PathBuf> = config.targets.iter().map(|t| t.path.clone()).collect();
    let pictures: Vec<ReferencePicture> = read_targets(&config.targets, &files)?
        .iter()
        .map(|target: &TargetView| ReferencePicture {
            label: target.label(),
            image: target.image.clone(),
        })
        .collect();
    let limit = config.program_timeout.max(MIN_IMPORT_TIME);
    let record = prepare(scene, service, &pictures, worker, folder.root(), limit).await?;
    write_record(folder.root(), record)
}

/// Asks the service, imports what it sent into the base scene in `worker` and saves the
/// scene as `init/init.blend` in the run folder `staging`; returns the record (mesh paths
/// relative to the run folder).
async fn prepare(
    scene: &SceneSettings,
    service: &ReconstructionService,
    pictures: &[ReferencePicture],
    worker: &dyn BlenderTransport,
    staging: &Path,
    limit: Duration,
) -> Result<InitRecord, CoreError> {
    let meshes = staging.join(INIT_MESHES);
    let reconstruction = service
        .reconstruct(pictures, &meshes)
        .await
        .map_err(|err| failed(&err.message))?;
    let mut refused = reconstruction.refused;
    let mut objects = Vec::new();
    let mut reset = Some(scene.base_scene());
    for object in reconstruction.objects {
        let ran = worker
            .execute(&import_program(&object), reset.clone(), Some(limit))
            .await
            .map_err(|err| {
                super::blender_error("Blender could not import the reconstructed objects", err)
            })?;
        if !ran.succeeded() {
            // Nothing of it is left in the scene; the next object starts where this one did.
            refused.push(RefusedObject {
                name: object.name.clone(),
                reason: format!(
                    "Blender's importer could not read its mesh: {}",
                    ran.error.map(|e| e.message).unwrap_or_default()
                ),
            });
            continue;
        }
        reset = None;
        let scene_name = ran
            .stdout
            .lines()
            .rev()
            .find_map(|line| line.strip_prefix(ROOT_MARKER))
            .and_then(|json| serde_json::from_str::<String>(json).ok())
            .unwrap_or_else(|| object.name.clone());
        objects.push(InitRecordObject {
            mesh: object
                .mesh
                .strip_prefix(staging)
                .unwrap_or(&object.mesh)
                .to_path_buf(),
            name: object.name,
            scene_name,
            format: object.format,
            transform: object.transform,
            confidence: object.confidence,
        });
    }
    if objects.is_empty() {
        let reasons: Vec<String> = refused
            .iter()
            .map(|r| format!("{}: {}", r.name, r.reason))
            .collect();
        return Err(failed(&format!(
            "no object of the reconstruction could be imported:\n  - {}",
            reasons.join("\n  - ")
        )));
    }
    save_scene_as(worker, &staging.join(INIT_BLEND))
        .await
        .map_err(|err| CoreError::worker("the initialised scene could not be saved", err))?;
    Ok(InitRecord {
        service: service.url().to_string(),
        service_seconds: reconstruction.seconds,
        base: scene.base_blend.clone(),
        objects,
        refused,
        answer: reconstruction.answer,
    })
}

/// Writes the record into the run folder `root`.
fn write_record(root: &Path, record: InitRecord) -> Result<InitRecord, CoreError> {
    let json = serde_json::to_vec_pretty(&record)
        .map_err(|err| CoreError::Config(format!("{INIT_RECORD} cannot be encoded: {err}")))?;
    let path = root.join(INIT_RECORD);
    viga_io::files::write_atomic(&path, &json).map_err(|err| CoreError::io(&path, err))?;
    Ok(record)
}

fn failed(why: &str) -> CoreError {
    CoreError::Config(format!(
        "scene initialisation failed, so the run did not start: {why}"
    ))
}

/// Blender Python that imports `object`'s mesh with Blender's importer into the current
/// scene (without its cameras and lights, which would compete with the run's), puts it where
/// the transform says, names it and marks every object it made with `viga_source = "init"`.
/// A mesh made of several parts gets an empty of the object's name as their parent. A file
/// the importer cannot read raises, with nothing of it left in the scene. The last line it
/// prints names the object as the scene has it.
fn import_program(object: &ReconstructedObject) -> String {
    let importer = match object.format {
        MeshFormat::Glb => "bpy.ops.import_scene.gltf",
        MeshFormat::Obj => "bpy.ops.wm.obj_import",
    };
    // By the real path it is granted by: a contained Blender reaches nothing else.
    let path = python_string(&viga_blender::real_paths::real_path(&object.mesh).to_string_lossy());
    let name = python_string(&object.name);
    let Transform {
        location,
        rotation_quaternion,
        scale,
    } = object.transform;
    let list = |values: &[f64]| {
        let numbers: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
        format!("({})", numbers.join(", "))
    };
    format!(
        "import bpy, json, mathutils
viga_before = set(bpy.data.objects.keys())
def viga_remove_new():
    for viga_name in set(bpy.data.objects.keys()) - viga_before:
        bpy.data.objects.remove(bpy.data.objects[viga_name], do_unlink=True)
try:
    {importer}(filepath={path})
except Exception:
    viga_remove_new()
    raise
for viga_obj in [o for o in bpy.data.objects if o.name not in viga_before and o.type in ('CAMERA', 'LIGHT')]:
    bpy.data.objects.remove(viga_obj, do_unlink=True)
imported = [o for o in bpy.data.objects if o.name not in viga_before]
if not any(o.type == 'MESH' for o in imported):
    viga_remove_new()
    raise RuntimeError('the file holds no mesh')
roots = [o for o in imported if o.parent is None or o.parent not in imported]
if len(roots) == 1:
    root = roots[0]
else:
    root = bpy.data.objects.new({name}, None)
    bpy.context.scene.collection.objects.link(root)
    for viga_obj in roots:
        viga_obj.parent = root
    imported.append(root)
root.matrix_world = mathutils.Matrix.LocRotScale(mathutils.Vector({location}), mathutils.Quaternion({rotation}), mathutils.Vector({scale})) @ root.matrix_world
root.name = {name}
for viga_obj in imported:
    viga_obj['viga_source'] = {source}
    viga_obj['viga_init'] = {name}
print({marker} + json.dumps(root.name))
",
        location = list(&location),
        rotation = list(&rotation_quaternion),
        scale = list(&scale),
        source = python_string(INITIALISED_SOURCE),
        marker = python_string(ROOT_MARKER),
    )
}

/// The initialisation a run folder recorded, if it was initialised.
pub fn read_init_record(run_folder: &Path) -> Option<InitRecord> {
    let bytes = std::fs::read(run_folder.join(INIT_RECORD)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_import_program_quotes_paths_and_names_and_places_the_root() {
        let object = ReconstructedObject {
            name: "the \"odd\" chair".to_owned(),
            mesh: PathBuf::from("/tmp/a'b/mesh.glb"),
            format: MeshFormat::Glb,
            transform: Transform {
                location: [1.0, 2.0, 0.5],
                rotation_quaternion: [1.0, 0.0, 0.0, 0.0],
                scale: [2.0, 2.0, 2.0],
            },
            confidence: 0.5,
        };
        let program = import_program(&object);
        assert!(program.contains("bpy.ops.import_scene.gltf(filepath=\"/tmp/a'b/mesh.glb\")"));
        assert!(program.contains("root.name = \"the \\\"odd\\\" chair\""));
        assert!(program.contains("mathutils.Vector((1.0, 2.0, 0.5))"));
        assert!(program.contains("viga_obj['viga_source'] = \"init\""));
        let obj = ReconstructedObject {
            format: MeshFormat::Obj,
            ..object
        };
        assert!(import_program(&obj).contains("bpy.ops.wm.obj_import("));
    }
}
