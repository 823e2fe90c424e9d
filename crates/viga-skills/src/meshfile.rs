//! Checks on mesh files that come from a service (a generated asset, a reconstructed
//! object) before Blender's importers are handed them: they are untrusted data, so each must
//! be what it says it is and must not make the importer read anything beside itself.
//!
//! - **GLB** (binary glTF 2.0): the header's magic, version and length match the file, the
//!   first chunk is JSON that parses, and no buffer or image names a URI other than a `data:`
//!   one (a URI would have the importer read a file next to it, or anywhere).
//! - **OBJ**: text without NUL bytes, with vertices and faces; no `call` or `csh` statement
//!   (the format's ways to run other files and shell commands, which Blender ignores but
//!   which have no business in a mesh), and `mtllib` naming plain file names only.
//!
//! Nothing here runs the file: Blender's own importers read it, in viga's contained worker.

use std::io::{BufRead as _, Read as _};
use std::path::Path;

/// The formats a service may hand viga meshes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MeshFormat {
    Glb,
    Obj,
}

impl MeshFormat {
    pub fn extension(self) -> &'static str {
        match self {
            Self::Glb => "glb",
            Self::Obj => "obj",
        }
    }

    /// The format a name's extension says (`chair.glb`, `a/b.OBJ`), if viga takes it.
    pub fn of_name(name: &str) -> Option<Self> {
        let extension = Path::new(name).extension()?.to_str()?.to_ascii_lowercase();
        match extension.as_str() {
            "glb" => Some(Self::Glb),
            "obj" => Some(Self::Obj),
            _ => None,
        }
    }
}

/// The largest JSON chunk of a GLB read for the check.
const MAX_GLB_JSON: u64 = 64 << 20;
/// The longest line of an OBJ file.
const MAX_OBJ_LINE: usize = 1 << 20;
const GLB_MAGIC: &[u8; 4] = b"glTF";
const GLB_JSON_CHUNK: &[u8; 4] = b"JSON";

/// Checks the file at `path` as a mesh of `format`; `Err` says what is wrong with it.
pub fn check_mesh(path: &Path, format: MeshFormat) -> Result<(), String> {
    match format {
        MeshFormat::Glb => check_glb(path),
        MeshFormat::Obj => check_obj(path),
    }
}

fn check_glb(path: &Path) -> Result<(), String> {
    let unreadable = |err: std::io::Error| format!("it cannot be read: {err}");
    let mut file = std::fs::File::open(path).map_err(unreadable)?;
    let size = file.metadata().map_err(unreadable)?.len();
    let mut header = [0u8; 20];
    file.read_exact(&mut header)
        .map_err(|_| "it is too short to be a GLB file".to_owned())?;
    if &header[0..4] != GLB_MAGIC {
        return Err("it is not a GLB file (no glTF magic at its start)".to_owned());
    }
    let word = |at: usize| {
        u32::from_le_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
    };
    if word(4) != 2 {
        return Err(format!("it is glTF version {}, not 2", word(4)));
    }
    if u64::from(word(8)) != size {
        return Err(format!(
            "its header says {} bytes but the file has {size}: it is cut off or padded",
            word(8)
        ));
    }
    if &header[16..20] != GLB_JSON_CHUNK {
        return Err("its first chunk is not the JSON chunk".to_owned());
    }
    let json_length = u64::from(word(12));
    if json_length > MAX_GLB_JSON || 20 + json_length > size {
        return Err(format!(
            "its JSON chunk ({json_length} bytes) is larger than the file or than viga reads"
        ));
    }
    let mut json = Vec::new();
    file.take(json_length)
        .read_to_end(&mut json)
        .map_err(unreadable)?;
    let document: serde_json::Value = serde_json::from_slice(&json)
        .map_err(|err| format!("its JSON chunk is not JSON ({err})"))?;
    for list in ["buffers", "images"] {
        let entries = document.get(list).and_then(serde_json::Value::as_array);
        for uri in entries.into_iter().flatten().filter_map(|e| e.get("uri")) {
            match uri.as_str() {
                Some(uri) if uri.starts_with("data:") => {}
                Some(uri) => {
                    let shown: String = uri.chars().take(80).collect();
                    return Err(format!(
                        "it refers to the file {shown:?}; a GLB from a service must hold all its data itself"
                    ));
                }
                None => return Err(format!("it has a {list} uri that is not a string")),
            }
        }
    }
    Ok(())
}

fn check_obj(path: &Path) -> Result<(), String> {
    let file = std::fs::File::open(path).map_err(|err| format!("it cannot be read: {err}"))?;
    let mut reader = std::io::BufReader::new(file);
    let mut line = Vec::new();
    let (mut vertices, mut faces) = (0usize, 0usize);
    for number in 1.. {
        line.clear();
        let read = (&mut reader)
            .take(MAX_OBJ_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|err| format!("it cannot be read: {err}"))?;
        if read == 0 {
            break;
        }
        if line.len() > MAX_OBJ_LINE {
            return Err(format!("its line {number} is longer than an OBJ line is"));
        }
        if line.contains(&0) {
            return Err("it is binary, not the text an OBJ file is".to_owned());
        }
        let text = String::from_utf8_lossy(&line);
        let mut words = text.split_whitespace();
        match words.next() {
            Some("v") => vertices += 1,
            Some("f") => faces += 1,
            Some(statement @ ("call" | "csh")) => {
                return Err(format!(
                    "its line {number} is a `{statement}` statement (runs another file or a command); a mesh has none"
                ));
            }
            Some("mtllib") => {
                if let Some(name) = words.find(|name| !plain_file_name(name)) {
                    return Err(format!(
                        "its line {number} names the material file {name:?}, which is not a plain file name beside it"
                    ));
                }
            }
            _ => {}
        }
    }
    if vertices < 3 || faces == 0 {
        return Err(format!(
            "it holds no mesh ({vertices} vertices, {faces} faces)"
        ));
    }
    Ok(())
}

fn plain_file_name(name: &str) -> bool {
    !name.is_empty() && !name.contains(['/', '\\', ':']) && name != ".." && name != "."
}

#[cfg(test)]
mod tests {
    use super::*;

    fn glb(json: &str) -> Vec<u8> {
        viga_testkit::mesh::glb(json, None)
    }

    fn checked(bytes: &[u8], format: MeshFormat) -> Result<(), String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("mesh.{}", format.extension()));
        std::fs::write(&path, bytes).unwrap();
        check_mesh(&path, format)
    }

    #[test]
    fn glb_files_must_be_whole_and_hold_their_own_data() {
        let good = glb(
            r#"{"asset": {"version": "2.0"}, "buffers": [{"byteLength": 4, "uri": "data:application/octet-stream;base64,AAAAAA=="}]}"#,
        );
        assert_eq!(checked(&good, MeshFormat::Glb), Ok(()));
        let mut cut = good.clone();
        cut.truncate(cut.len() - 4);
        assert!(
            checked(&cut, MeshFormat::Glb)
                .unwrap_err()
                .contains("cut off")
        );
        let outside =
            glb(r#"{"asset": {"version": "2.0"}, "images": [{"uri": "../../../etc/hostname"}]}"#);
        assert!(
            checked(&outside, MeshFormat::Glb)
                .unwrap_err()
                .contains("refers to the file \"../../../etc/hostname\"")
        );
        assert!(
            checked(b"PK\x03\x04 not a glb at all", MeshFormat::Glb)
                .unwrap_err()
                .contains("no glTF magic")
        );
        let mut version1 = good.clone();
        version1[4] = 1;
        assert!(
            checked(&version1, MeshFormat::Glb)
                .unwrap_err()
                .contains("version 1")
        );
        assert!(
            checked(&glb("{not json"), MeshFormat::Glb)
                .unwrap_err()
                .contains("not JSON")
        );
    }

    #[test]
    fn obj_files_must_be_meshes_without_commands_or_far_material_files() {
        let cube = "o Box\nmtllib box.mtl\nv 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n";
        assert_eq!(checked(cube.as_bytes(), MeshFormat::Obj), Ok(()));
        let testkit_cube = viga_testkit::mesh::cube_obj("Box");
        assert_eq!(checked(testkit_cube.as_bytes(), MeshFormat::Obj), Ok(()));
        let glb_cube = viga_testkit::mesh::cube_glb("Box");
        assert_eq!(checked(&glb_cube, MeshFormat::Glb), Ok(()));
        for (bad, why) in [
            (
                "v 0 0 0\nv 1 0 0\nv 0 1 0\ncsh rm -rf ~\nf 1 2 3\n",
                "`csh` statement",
            ),
            ("call other.obj\nv 0 0 0\n", "`call` statement"),
            (
                "mtllib ../../secret.mtl\nv 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n",
                "not a plain file name",
            ),
            ("# only a comment\n", "holds no mesh"),
            ("v 0 0 0\0\n", "binary"),
        ] {
            let err = checked(bad.as_bytes(), MeshFormat::Obj).unwrap_err();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
    }

    #[test]
    fn formats_come_from_extensions() {
        assert_eq!(
            MeshFormat::of_name("meshes/Chair.GLB"),
            Some(MeshFormat::Glb)
        );
        assert_eq!(MeshFormat::of_name("a.obj"), Some(MeshFormat::Obj));
        assert_eq!(MeshFormat::of_name("a.fbx"), None);
        assert_eq!(MeshFormat::of_name("glb"), None);
    }
}
