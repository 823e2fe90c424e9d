//! A compact text summary of a scene page: one line per object, so the model reads numbers
//! it can reason about without a large JSON dump in its context.

use std::fmt::Write as _;

use viga_protocol::bridge::{SceneInfo, SceneObject};

fn vector(values: &[f64; 3]) -> String {
    format!(
        "({}, {}, {})",
        short(values[0]),
        short(values[1]),
        short(values[2])
    )
}

fn short(value: f64) -> String {
    let rounded = (value * 1000.0).round() / 1000.0;
    if rounded == 0.0 {
        "0".to_owned()
    } else {
        format!("{rounded}")
    }
}

fn describe(object: &SceneObject) -> String {
    let mut line = format!(
        "- {} [{}] loc{} rot{} scale{} size{}",
        object.name,
        object.kind,
        vector(&object.location),
        vector(&object.rotation_euler),
        vector(&object.scale),
        vector(&object.dimensions)
    );
    if !object.visible {
        line.push_str(" hidden");
    }
    if let Some(parent) = &object.parent {
        let _ = write!(line, " parent={parent}");
    }
    if !object.materials.is_empty() {
        let _ = write!(line, " materials=[{}]", object.materials.join(", "));
    }
    if !object.modifiers.is_empty() {
        let modifiers: Vec<String> = object
            .modifiers
            .iter()
            .map(|m| format!("{}:{}", m.name, m.kind))
            .collect();
        let _ = write!(line, " modifiers=[{}]", modifiers.join(", "));
    }
    if let Some(mesh) = &object.mesh {
        let _ = write!(line, " verts={} faces={}", mesh.vertices, mesh.polygons);
    }
    if !object.shape_keys.is_empty() {
        let keys: Vec<String> = object
            .shape_keys
            .iter()
            .map(|k| format!("{}={}", k.name, short(k.value)))
            .collect();
        let _ = write!(line, " shape_keys=[{}]", keys.join(", "));
    }
    if let Some(light) = &object.light {
        let _ = write!(
            line,
            " light={} energy={} color={}",
            light.kind,
            short(light.energy),
            vector(&light.color)
        );
    }
    if let Some(source) = &object.source {
        let _ = write!(line, " source={source}");
    }
    if let Some(camera) = &object.camera {
        let _ = write!(
            line,
            " camera={} lens={}mm",
            camera.kind,
            short(camera.lens)
        );
    }
    line
}

/// The page as text, with a pointer to the next page when there is one.
pub fn summarize(info: &SceneInfo) -> String {
    let mut text = format!(
        "Scene {:?} (Blender {}), frames {}-{} (current {}), camera {}, {} objects",
        info.scene,
        info.blender_version,
        info.frame_start,
        info.frame_end,
        info.frame_current,
        info.active_camera.as_deref().unwrap_or("none"),
        info.total_objects
    );
    if !info.objects.is_empty() {
        let last = info.offset as usize + info.objects.len();
        let _ = write!(text, "; showing {}-{}:", info.offset + 1, last);
    }
    for object in &info.objects {
        text.push('\n');
        text.push_str(&describe(object));
    }
    if let Some(next) = info.next_offset {
        let _ = write!(
            text,
            "\n(more objects: call get_scene_info with offset={next})"
        );
    }
    text
}
