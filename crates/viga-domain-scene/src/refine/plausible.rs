//! What keeps a fitted scene plausible: the start scene's own structure, read from the
//! objects' world bounding boxes and rotations, and how far a candidate strays from it.
//! From one camera a tilted, nearer object can look like a flat, farther one; a search that
//! fits the picture alone loses the scene. So objects that rested on a surface should rest on
//! one, an object keeps the side it had up, and objects that were apart do not interpenetrate.
//! Each is a penalty, not a wall: a target that truly demands a lifted or tilted object can
//! still pay for it.

use viga_protocol::bridge::SceneObject;

/// How far a candidate scene strays from the start's structure.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Violations {
    /// Sum over the objects that rested of how far (in scene lengths) they are now from a
    /// surface under them.
    pub lifted: f64,
    /// Sum over the objects of how far (in radians) the side that was up has turned away
    /// from up.
    pub tilted: f64,
    /// Sum over pairs of how much deeper (in scene lengths) their boxes overlap than at the
    /// start.
    pub overlapping: f64,
}

impl Violations {
    /// One number: scene lengths and radians weighted alike, a lift twice, an overlap a
    /// quarter (a wall to walk through on the way: an object must often pass another's box
    /// to reach its place).
    pub fn total(&self) -> f64 {
        2.0 * self.lifted + self.tilted + 0.25 * self.overlapping
    }
}

/// An object as the structure sees it: its world box and its rotation.
#[derive(Debug, Clone, PartialEq)]
struct Body {
    name: String,
    min: [f64; 3],
    max: [f64; 3],
    rotation: [[f64; 3]; 3],
}

impl Body {
    fn of(object: &SceneObject) -> Option<Body> {
        (object.kind == "MESH" && object.visible).then(|| Body {
            name: object.name.clone(),
            min: object.bbox_min,
            max: object.bbox_max,
            rotation: rotation_xyz(object.rotation_euler),
        })
    }

    fn diagonal(&self) -> f64 {
        (0..3)
            .map(|axis| (self.max[axis] - self.min[axis]).powi(2))
            .sum::<f64>()
            .sqrt()
    }

    /// Whether the two footprints (boxes seen from above) share an area.
    fn footprints_meet(&self, other: &Body) -> bool {
        (0..2).all(|axis| self.min[axis] < other.max[axis] && other.min[axis] < self.max[axis])
    }

    /// How deep the two boxes overlap: the smallest of the three overlaps, 0 when apart.
    fn overlap_depth(&self, other: &Body) -> f64 {
        (0..3)
            .map(|axis| self.max[axis].min(other.max[axis]) - self.min[axis].max(other.min[axis]))
            .fold(f64::INFINITY, f64::min)
            .max(0.0)
    }
}

/// The most objects whose pairs are compared; a scene with more keeps rest and tilt only.
const MAX_PAIRED: usize = 400;

/// The start scene's structure.
#[derive(Debug, Clone, PartialEq)]
pub struct Structure {
    bodies: Vec<Body>,
    /// Per body, whether it rested on a surface at the start.
    rested: Vec<bool>,
    /// Per body, the direction in its own frame that pointed up at the start.
    up_in_body: Vec<[f64; 3]>,
    /// A typical object's size (the median box diagonal): lengths are measured in it.
    scale: f64,
    /// How close counts as touching, in scene units.
    tolerance: f64,
}

impl Structure {
    /// The structure of the start scene's objects.
    pub fn of(objects: &[SceneObject]) -> Structure {
        let bodies: Vec<Body> = objects.iter().filter_map(Body::of).collect();
        let mut diagonals: Vec<f64> = bodies.iter().map(Body::diagonal).collect();
        diagonals.sort_by(f64::total_cmp);
        let scale = diagonals
            .get(diagonals.len() / 2)
            .copied()
            .unwrap_or(1.0)
            .max(1e-3);
        // The bridge rounds to 1e-4; a hundredth of an object still touches.
        let tolerance = (0.01 * scale).max(2e-4);
        let rested = bodies
            .iter()
            .map(|body| rests_on_one(body, &bodies, tolerance))
            .collect();
        let up_in_body = bodies
            .iter()
            .map(|body| transpose_times(&body.rotation, [0.0, 0.0, 1.0]))
            .collect();
        Structure {
            bodies,
            rested,
            up_in_body,
            scale,
            tolerance,
        }
    }

    /// How far `objects` (the same scene after a candidate program) stray from it. Objects
    /// the start did not have are not judged; objects it had that are gone are not either.
    pub fn violations(&self, objects: &[SceneObject]) -> Violations {
        let now: Vec<Body> = objects.iter().filter_map(Body::of).collect();
        let find = |name: &str| now.iter().find(|body| body.name == name);
        let mut violations = Violations::default();
        for (index, start) in self.bodies.iter().enumerate() {
            let Some(body) = find(&start.name) else {
                continue;
            };
            if self.rested[index] {
                // Off every surface (over an edge, out of the scene) it would fall: as bad as
                // a lift by its own size.
                let gap = match nearest_surface_gap(body, &now, self.tolerance) {
                    Some(gap) => gap - self.tolerance,
                    None => body.diagonal(),
                };
                violations.lifted += gap.max(0.0) / self.scale;
            }
            let up = times(&body.rotation, self.up_in_body[index]);
            violations.tilted += up[2].clamp(-1.0, 1.0).acos();
        }
        if self.bodies.len() <= MAX_PAIRED {
            violations.overlapping = self.deeper_overlaps(&now) / self.scale;
        }
        violations
    }

    /// The sum over pairs of start objects of how much deeper they overlap now.
    fn deeper_overlaps(&self, now: &[Body]) -> f64 {
        let matched: Vec<(&Body, &Body)> = self
            .bodies
            .iter()
            .filter_map(|start| {
                now.iter()
                    .find(|body| body.name == start.name)
                    .map(|body| (start, body))
            })
            .collect();
        let mut total = 0.0;
        for (i, (start_a, a)) in matched.iter().enumerate() {
            for (start_b, b) in &matched[i + 1..] {
                let deeper = a.overlap_depth(b) - start_a.overlap_depth(start_b) - self.tolerance;
                total += deeper.max(0.0);
            }
        }
        total
    }
}

/// Whether `body` rests on one of `bodies`: one whose top is level with its bottom and whose
/// footprint meets its own.
fn rests_on_one(body: &Body, bodies: &[Body], tolerance: f64) -> bool {
    bodies.iter().any(|other| {
        let top = other.max[2];
        other.name != body.name
            && other.footprints_meet(body)
            && (body.min[2] - top).abs() <= tolerance
            && top < body.max[2]
    })
}

/// How far `body`'s bottom is from the nearest top under it now: of the objects whose
/// footprint meets its own and whose top is below its middle (a surface it could stand on,
/// or has sunk into); `None` when there is none.
fn nearest_surface_gap(body: &Body, bodies: &[Body], tolerance: f64) -> Option<f64> {
    let middle = 0.5 * (body.min[2] + body.max[2]);
    bodies
        .iter()
        .filter(|other| other.name != body.name && other.footprints_meet(body))
        .map(|other| other.max[2])
        .filter(|top| *top <= middle.max(body.min[2] + tolerance))
        .map(|top| (body.min[2] - top).abs())
        .reduce(f64::min)
}

/// The rotation matrix of Blender's default XYZ Euler angles: Rz · Ry · Rx.
fn rotation_xyz([x, y, z]: [f64; 3]) -> [[f64; 3]; 3] {
    let (sx, cx) = x.sin_cos();
    let (sy, cy) = y.sin_cos();
    let (sz, cz) = z.sin_cos();
    [
        [cz * cy, cz * sy * sx - sz * cx, cz * sy * cx + sz * sx],
        [sz * cy, sz * sy * sx + cz * cx, sz * sy * cx - cz * sx],
        [-sy, cy * sx, cy * cx],
    ]
}

fn times(matrix: &[[f64; 3]; 3], vector: [f64; 3]) -> [f64; 3] {
    std::array::from_fn(|row| (0..3).map(|k| matrix[row][k] * vector[k]).sum())
}

fn transpose_times(matrix: &[[f64; 3]; 3], vector: [f64; 3]) -> [f64; 3] {
    std::array::from_fn(|column| (0..3).map(|k| matrix[k][column] * vector[k]).sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(name: &str, min: [f64; 3], max: [f64; 3], rotation: [f64; 3]) -> SceneObject {
        serde_json::from_value(serde_json::json!({
            "name": name, "type": "MESH", "location": [0.0, 0.0, 0.0],
            "rotation_euler": rotation, "scale": [1.0, 1.0, 1.0], "dimensions": [1.0, 1.0, 1.0],
            "bbox_min": min, "bbox_max": max, "visible": true,
        }))
        .unwrap()
    }

    fn table_and_book(book_min_z: f64, book_x: f64, tilt: f64) -> Vec<SceneObject> {
        vec![
            object("Floor", [-5.0, -5.0, 0.0], [5.0, 5.0, 0.0], [0.0; 3]),
            object("Table", [-1.0, -1.0, 0.0], [1.0, 1.0, 0.8], [0.0; 3]),
            object(
                "Book",
                [book_x - 0.2, -0.15, book_min_z],
                [book_x + 0.2, 0.15, book_min_z + 0.05],
                [tilt, 0.0, 0.4],
            ),
        ]
    }

    #[test]
    fn the_start_breaks_nothing() {
        let start = table_and_book(0.8, 0.0, 0.0);
        let structure = Structure::of(&start);
        assert_eq!(structure.violations(&start), Violations::default());
    }

    #[test]
    fn a_low_neighbour_under_the_footprint_is_not_the_surface_it_rests_on() {
        // A tall vase on the table beside a block whose box reaches under the vase's
        // footprint: the block's top is below the vase's middle, the table's is its bottom.
        let mut scene = table_and_book(0.8, 0.0, 0.0);
        scene.push(object("Vase", [0.3, 0.3, 0.8], [0.6, 0.6, 1.6], [0.0; 3]));
        scene.push(object("Block", [0.5, 0.5, 0.8], [0.9, 0.9, 1.1], [0.0; 3]));
        let structure = Structure::of(&scene);
        assert_eq!(structure.violations(&scene), Violations::default());
    }

    #[test]
    fn a_book_slid_along_its_table_and_turned_about_up_is_plausible() {
        let structure = Structure::of(&table_and_book(0.8, 0.0, 0.0));
        let slid = structure.violations(&table_and_book(0.8, 0.5, 0.0));
        assert!(slid.total() < 1e-9, "{slid:?}");
    }

    #[test]
    fn lifting_sinking_tilting_and_burying_are_violations() {
        let structure = Structure::of(&table_and_book(0.8, 0.0, 0.0));
        let lifted = structure.violations(&table_and_book(1.1, 0.0, 0.0));
        assert!(lifted.lifted > 0.05, "{lifted:?}");
        let sunk = structure.violations(&table_and_book(0.6, 0.0, 0.0));
        assert!(sunk.lifted > 0.05 && sunk.overlapping > 0.0, "{sunk:?}");
        let tilted = structure.violations(&table_and_book(0.8, 0.0, 1.0));
        assert!((tilted.tilted - 1.0).abs() < 1e-6, "{tilted:?}");
        // Off the table's edge, at the table's height over the floor.
        let floating = structure.violations(&table_and_book(0.8, 3.0, 0.0));
        assert!(floating.lifted > 0.2, "{floating:?}");
        let fallen = structure.violations(&table_and_book(0.0, 3.0, 0.0));
        assert!(fallen.lifted < 1e-9, "it rests on the floor: {fallen:?}");
        let gone = structure.violations(&table_and_book(0.0, 30.0, 0.0));
        assert!(gone.lifted > 0.1, "off every surface: {gone:?}");
    }
}
