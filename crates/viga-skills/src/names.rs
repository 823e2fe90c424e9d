//! Names read back from run folders and results files and then used as paths: render ids,
//! eval instance names. A folder may come from anyone (a download, a shared disk), so such a
//! name is data: it is checked to stay inside the folder it names something in, never
//! trusted to.

use std::path::{Component, Path, PathBuf};

/// A name that would leave the folder it belongs in, or is no name at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} {name:?} is refused: {why}")]
pub struct UnsafeName {
    /// What the name names ("render id", "instance name").
    pub what: &'static str,
    pub name: String,
    pub why: &'static str,
}

/// `id` as a path relative to the folder it lives in: `/`-separated parts, each a plain
/// name (render ids look like `renders/3/front.png`). Absolute paths, `..` and `.` parts,
/// empty parts and backslashes are refused.
pub fn relative_path(what: &'static str, id: &str) -> Result<PathBuf, UnsafeName> {
    let refuse = |why| UnsafeName {
        what,
        name: id.to_owned(),
        why,
    };
    if id.starts_with('/') {
        return Err(refuse("it is an absolute path, not one inside the folder"));
    }
    let mut path = PathBuf::new();
    for part in id.split('/') {
        path.push(plain_part(part).map_err(refuse)?);
    }
    Ok(path)
}

/// `name` as one file or folder name: no separator, not `.` or `..`, not empty.
pub fn plain_name<'a>(what: &'static str, name: &'a str) -> Result<&'a str, UnsafeName> {
    let refuse = |why| UnsafeName {
        what,
        name: name.to_owned(),
        why,
    };
    if name.contains('/') {
        return Err(refuse(
            "it holds a path separator where a plain name belongs",
        ));
    }
    plain_part(name).map_err(refuse)
}

/// One part of a path that names exactly one entry of its folder on this platform.
fn plain_part(part: &str) -> Result<&str, &'static str> {
    if part.is_empty() {
        return Err("it has an empty part");
    }
    if part.contains(['\\', '\0']) {
        return Err("it holds a backslash or a NUL byte");
    }
    let mut components = Path::new(part).components();
    match (components.next(), components.next()) {
        (Some(Component::Normal(_)), None) => Ok(part),
        (Some(Component::ParentDir), None) => Err("it climbs out of its folder with `..`"),
        _ => Err("a part of it is not a plain name (`.`, a drive or a root)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_relative_paths_are_kept() {
        assert_eq!(
            relative_path("render id", "renders/3/front.png").unwrap(),
            Path::new("renders").join("3").join("front.png")
        );
        assert_eq!(
            plain_name("instance name", "placement12"),
            Ok("placement12")
        );
        assert_eq!(plain_name("instance name", "a..b"), Ok("a..b"));
    }

    #[test]
    fn names_leaving_their_folder_are_refused() {
        for (id, why) in [
            ("/etc/passwd", "absolute"),
            ("../../.ssh/id_rsa", "`..`"),
            ("renders/../../x.png", "`..`"),
            ("renders//x.png", "empty part"),
            ("renders/./x.png", "not a plain name"),
            ("renders\\..\\x.png", "backslash"),
            ("", "empty part"),
        ] {
            let err = relative_path("render id", id).unwrap_err();
            assert!(err.to_string().contains(why), "{id:?}: {err}");
            assert!(err.to_string().starts_with("render id "), "{err}");
        }
        for name in ["..", ".", "", "a/b", "/abs", "a\0b"] {
            assert!(plain_name("instance name", name).is_err(), "{name:?}");
        }
    }
}
