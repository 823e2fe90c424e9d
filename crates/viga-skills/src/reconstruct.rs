//! The client of a scene reconstruction service (`viga run --init URL`): the target pictures
//! go in, and for each object the service finds, a name, a mesh file (GLB or OBJ), a
//! transform and a confidence come back. The contract is small and documented in
//! `docs/init-service.md`; `tools/init_service/sam3d_adapter.py` serves VIGA's own SAM /
//! SAM-3D reconstruction behind it on a GPU machine.
//!
//! What the service answers is untrusted. The answer is bounded in size and read object by
//! object: names must be short plain text and unique, numbers finite and in range, mesh URLs
//! on the service's own origin; each mesh is downloaded bounded into its own folder and
//! checked ([`crate::meshfile`]). An object that fails a check is refused with its reason and
//! the others go on; an answer with no usable object is an error. The whole call, downloads
//! included, has one deadline.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use reqwest::Url;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::assets::ReferencePicture;
use crate::context::safe_file_stem;
use crate::http::{Body, FetchError, ServiceClient, ServiceSpec, base_url};
use crate::meshfile::{MeshFormat, check_mesh};

/// The contract's version, sent as `viga_init` with every request.
pub const INIT_PROTOCOL: u32 = 1;

/// How viga talks to a reconstruction service.
#[derive(Debug, Clone, PartialEq)]
pub struct ReconstructionConfig {
    /// Where the pictures are POSTed (`http://gpu-box:8765/reconstruct`).
    pub url: String,
    /// The whole call: the service's answer and every mesh download.
    pub deadline: Duration,
    pub connect_timeout: Duration,
    /// The largest answer read.
    pub max_answer_bytes: u64,
    /// The most objects taken from one answer.
    pub max_objects: usize,
    /// The largest mesh file downloaded.
    pub max_mesh_bytes: u64,
    /// All meshes together.
    pub max_total_bytes: u64,
}

impl ReconstructionConfig {
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            // Segmenting and reconstructing a dozen objects takes minutes on one GPU.
            deadline: Duration::from_secs(900),
            connect_timeout: Duration::from_secs(10),
            max_answer_bytes: 1 << 20,
            max_objects: 64,
            max_mesh_bytes: 128 << 20,
            max_total_bytes: 512 << 20,
        }
    }
}

/// Where an object goes: Blender's world coordinates (Z up, metres), the rotation a unit
/// quaternion `[w, x, y, z]`, applied after the scale and before the location.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transform {
    pub location: [f64; 3],
    pub rotation_quaternion: [f64; 4],
    pub scale: [f64; 3],
}

/// An object of the answer, checked, with its mesh downloaded and checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReconstructedObject {
    pub name: String,
    pub mesh: PathBuf,
    pub format: MeshFormat,
    pub transform: Transform,
    /// The service's confidence in the object, 0 to 1.
    pub confidence: f64,
}

/// An object of the answer viga did not take, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RefusedObject {
    /// Its name as the service gave it (cut short), or its position when it had none.
    pub name: String,
    pub reason: String,
}

/// What the service answered, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Reconstruction {
    pub objects: Vec<ReconstructedObject>,
    pub refused: Vec<RefusedObject>,
    /// The answer as it came (for the run folder's record).
    pub answer: Value,
    /// How long the call took, downloads included.
    pub seconds: f64,
}

/// A reconstruction service.
#[derive(Debug)]
pub struct ReconstructionService {
    config: ReconstructionConfig,
    url: Url,
    http: ServiceClient,
}

/// An object of the answer as the contract describes it.
#[derive(Debug, Deserialize)]
struct WireObject {
    name: String,
    mesh: String,
    #[serde(default)]
    format: Option<MeshFormat>,
    transform: Transform,
    confidence: f64,
}

/// The longest object name: Blender's limit for names, in bytes.
const MAX_NAME_BYTES: usize = 63;
/// Coordinates and scales beyond this are no scene's.
const MAX_COORDINATE: f64 = 1e5;
/// The smallest scale on any axis.
const MIN_SCALE: f64 = 1e-6;

impl ReconstructionService {
    /// The client of the service at `config.url`; `Err` says what is wrong with it.
    pub fn new(config: ReconstructionConfig) -> Result<Self, String> {
        let url = base_url(&config.url, "the reconstruction service address (--init)")?;
        let http = ServiceClient::new(ServiceSpec {
            connect_timeout: config.connect_timeout,
            // The service may think for minutes before it says anything.
            idle_timeout: config.deadline,
            unreachable_hint: "Is the service running there (docs/init-service.md says how to start one)? Check the address and the network".to_owned(),
            retry_hint: "try again when the service is ready, or start without --init".to_owned(),
            quote_error_message: true,
            ..ServiceSpec::new("the reconstruction service", url.clone())
        })?;
        Ok(Self { config, url, http })
    }

    pub fn url(&self) -> &Url {
        &self.url
    }

    /// Sends `pictures` to the service and downloads the meshes of its answer into `into`
    /// (one folder per object); `Err` when the service cannot be asked, answers nothing
    /// usable, or the deadline passes.
    pub async fn reconstruct(
        &self,
        pictures: &[ReferencePicture],
        into: &Path,
    ) -> Result<Reconstruction, FetchError> {
        let started = Instant::now();
        let deadline = started + self.config.deadline;
        let answer = self.ask(pictures).await?;
        let entries = object_entries(&answer)?;
        let (objects, refused) = self.take_all(entries, into, deadline).await;
        if objects.is_empty() {
            return Err(none_usable(&refused));
        }
        Ok(Reconstruction {
            objects,
            refused,
            answer,
            seconds: started.elapsed().as_secs_f64(),
        })
    }

    /// Sends the pictures as the contract describes and reads the service's answer as JSON.
    async fn ask(&self, pictures: &[ReferencePicture]) -> Result<Value, FetchError> {
        let body = serde_json::json!({
            "viga_init": INIT_PROTOCOL,
            "pictures": pictures.iter().map(|picture| serde_json::json!({
                "view": picture.label,
                "media_type": picture.image.media_type,
                "data": base64_of(&picture.image.data),
            })).collect::<Vec<_>>(),
        });
        let bytes = self
            .http
            .fetch_bytes(
                reqwest::Method::POST,
                &self.url,
                Some(Body::json(&body)),
                self.config.max_answer_bytes,
                self.config.deadline,
                "the reconstruction request",
            )
            .await?;
        serde_json::from_slice(&bytes).map_err(|err| {
            FetchError::new(format!(
                "the reconstruction service's answer is not JSON ({err}); docs/init-service.md describes what it must send"
            ))
        })
    }

    /// Takes the answer's objects in turn, at most `max_objects` of them; one that fails a
    /// check is refused with its reason, and the others go on.
    async fn take_all(
        &self,
        entries: &[Value],
        into: &Path,
        deadline: Instant,
    ) -> (Vec<ReconstructedObject>, Vec<RefusedObject>) {
        let mut objects = Vec::new();
        let mut refused = Vec::new();
        let mut total = 0u64;
        for (index, entry) in entries.iter().enumerate() {
            if index >= self.config.max_objects {
                refused.push(RefusedObject {
                    name: format!("objects {} and later", index + 1),
                    reason: format!(
                        "viga takes at most {} objects from one reconstruction",
                        self.config.max_objects
                    ),
                });
                break;
            }
            let taken = self
                .take(index, entry, &objects, into, deadline, &mut total)
                .await;
            match taken {
                Ok(object) => objects.push(object),
                Err(reason) => refused.push(RefusedObject {
                    name: shown_name(index, entry),
                    reason,
                }),
            }
        }
        (objects, refused)
    }

    /// One object of the answer, checked and its mesh downloaded; `Err` says why it is not
    /// taken.
    async fn take(
        &self,
        index: usize,
        entry: &Value,
        taken: &[ReconstructedObject],
        into: &Path,
        deadline: Instant,
        total: &mut u64,
    ) -> Result<ReconstructedObject, String> {
        let wire: WireObject = serde_json::from_value(entry.clone())
            .map_err(|err| format!("it is not the object the contract describes ({err})"))?;
        check_name(&wire.name)?;
        if taken.iter().any(|object| object.name == wire.name) {
            return Err("another object of the answer has the same name".to_owned());
        }
        let transform = checked_transform(wire.transform)?;
        if !(0.0..=1.0).contains(&wire.confidence) {
            return Err(format!(
                "its confidence {} is not between 0 and 1",
                wire.confidence
            ));
        }
        let url = self
            .url
            .join(&wire.mesh)
            .map_err(|err| format!("its mesh {:?} is not a URL ({err})", short(&wire.mesh)))?;
        if !self.http.allowed(&url) {
            return Err(format!(
                "its mesh {url} is not on the service's own address {}",
                crate::http::origin(&self.url)
            ));
        }
        let format = wire
            .format
            .or_else(|| MeshFormat::of_name(url.path()))
            .ok_or("its mesh is neither a .glb nor an .obj file (give \"format\")")?;
        let folder = into.join(format!("{:02}-{}", index + 1, safe_file_stem(&wire.name)));
        std::fs::create_dir_all(&folder)
            .map_err(|err| format!("{} cannot be made: {err}", folder.display()))?;
        let mesh = folder.join(format!("mesh.{}", format.extension()));
        let room = self
            .config
            .max_total_bytes
            .saturating_sub(*total)
            .min(self.config.max_mesh_bytes);
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "the reconstruction took longer than {:.0} s before its mesh was downloaded",
                self.config.deadline.as_secs_f64()
            ));
        }
        let downloaded = self
            .http
            .download(
                &url,
                &mesh,
                room,
                left,
                &format!("the mesh of {}", wire.name),
            )
            .await
            .map_err(|err| err.message)
            .and_then(|bytes| check_mesh(&mesh, format).map(|()| bytes));
        match downloaded {
            Ok(bytes) => {
                *total += bytes;
                Ok(ReconstructedObject {
                    name: wire.name,
                    mesh,
                    format,
                    transform,
                    confidence: wire.confidence,
                })
            }
            Err(reason) => {
                let _ = std::fs::remove_dir_all(&folder);
                Err(format!("its mesh is refused: {reason}"))
            }
        }
    }
}

/// The objects of the service's answer; `Err` when it has no list of them, or an empty one.
fn object_entries(answer: &Value) -> Result<&[Value], FetchError> {
    let entries = answer
        .get("objects")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            FetchError::new(
                "the reconstruction service's answer has no \"objects\" list; docs/init-service.md describes what it must send".to_owned(),
            )
        })?;
    if entries.is_empty() {
        return Err(FetchError::new(
            "the reconstruction service found no object in the target picture; start without --init".to_owned(),
        ));
    }
    Ok(entries)
}

/// The error for an answer of which no object could be used: each one's reason.
fn none_usable(refused: &[RefusedObject]) -> FetchError {
    let reasons: Vec<String> = refused
        .iter()
        .map(|r| format!("{}: {}", r.name, r.reason))
        .collect();
    FetchError::new(format!(
        "viga could use none of the reconstruction service's objects:\n  - {}",
        reasons.join("\n  - ")
    ))
}

fn check_name(name: &str) -> Result<(), String> {
    if name.trim().is_empty() || name.trim() != name {
        return Err("its name is empty or starts or ends with a space".to_owned());
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(format!(
            "its name is longer than Blender's {MAX_NAME_BYTES} bytes"
        ));
    }
    if name.chars().any(char::is_control) {
        return Err("its name has control characters".to_owned());
    }
    Ok(())
}

/// The transform with a unit quaternion, or why it is not one.
fn checked_transform(transform: Transform) -> Result<Transform, String> {
    let numbers = transform
        .location
        .iter()
        .chain(&transform.rotation_quaternion)
        .chain(&transform.scale);
    if numbers
        .clone()
        .any(|n| !n.is_finite() || n.abs() > MAX_COORDINATE)
    {
        return Err(format!(
            "its transform has a number that is not finite or beyond {MAX_COORDINATE}"
        ));
    }
    if transform.scale.iter().any(|s| s.abs() < MIN_SCALE) {
        return Err("its transform scales an axis to nothing".to_owned());
    }
    let [w, x, y, z] = transform.rotation_quaternion;
    let norm = (w * w + x * x + y * y + z * z).sqrt();
    if norm < 1e-6 {
        return Err("its rotation quaternion is zero".to_owned());
    }
    Ok(Transform {
        rotation_quaternion: [w / norm, x / norm, y / norm, z / norm],
        ..transform
    })
}

/// An object's name for a refusal: as given, cut short, or its position.
fn shown_name(index: usize, entry: &Value) -> String {
    entry
        .get("name")
        .and_then(Value::as_str)
        .map(|name| short(name).to_owned())
        .filter(|name| !name.trim().is_empty())
        .unwrap_or_else(|| format!("object {}", index + 1))
}

fn short(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).take(60).collect()
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transform() -> Transform {
        Transform {
            location: [1.0, 2.0, 0.0],
            rotation_quaternion: [2.0, 0.0, 0.0, 0.0],
            scale: [1.0, 1.0, 1.0],
        }
    }

    #[test]
    fn names_and_transforms_are_checked() {
        assert!(check_name("red_chair").is_ok());
        assert!(check_name("Stuhl 2 ü").is_ok());
        for bad in ["", " chair", "a\nb", &"x".repeat(64)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            checked_transform(transform()).unwrap().rotation_quaternion,
            [1.0, 0.0, 0.0, 0.0],
            "normalised"
        );
        for bad in [
            Transform {
                location: [f64::NAN, 0.0, 0.0],
                ..transform()
            },
            Transform {
                scale: [1.0, 0.0, 1.0],
                ..transform()
            },
            Transform {
                rotation_quaternion: [0.0; 4],
                ..transform()
            },
            Transform {
                location: [1e9, 0.0, 0.0],
                ..transform()
            },
        ] {
            assert!(checked_transform(bad).is_err(), "{bad:?}");
        }
    }
}
