//! Placing by sight: where the render and its target differ in a patch the object is not in,
//! the object may belong there. Photometric loss cannot say so: an object off its place
//! differs from the target by the same pixels wherever it stands until it overlaps its place,
//! and on the way it hides and is hidden by others, so a descent moving one coordinate at a
//! time stops short. A person looks at the picture, sees the empty spot and puts the object
//! there; this module does the same with the camera's projection.
//!
//! Pure geometry here (the camera, the patches of difference, the moves they suggest); the
//! scene is read through [`super::SceneObjective`].

use image::RgbImage;

use super::literals::Literal;

/// A camera's projection of world points into a picture of `width` by `height` pixels.
#[derive(Debug, Clone, PartialEq)]
pub struct Projection {
    /// Blender's projection matrix times the camera's inverted world matrix (row-major): a
    /// world point to clip space.
    matrix: [[f64; 4]; 4],
    inverse: [[f64; 4]; 4],
    width: f64,
    height: f64,
}

impl Projection {
    /// `None` when the matrix cannot be inverted (a camera scaled to nothing).
    pub fn new(matrix: [[f64; 4]; 4], width: u32, height: u32) -> Option<Self> {
        Some(Self {
            inverse: invert(&matrix)?,
            matrix,
            width: f64::from(width),
            height: f64::from(height),
        })
    }

    /// The pixel (x right, y down) a world point lands on; `None` behind the camera.
    pub fn pixel(&self, point: [f64; 3]) -> Option<[f64; 2]> {
        let clip = transform(&self.matrix, [point[0], point[1], point[2], 1.0]);
        if clip[3] <= 1e-9 {
            return None;
        }
        let (x, y) = (clip[0] / clip[3], clip[1] / clip[3]);
        Some([(x + 1.0) * 0.5 * self.width, (1.0 - y) * 0.5 * self.height])
    }

    /// Where the line of sight through `pixel` meets the level plane at height `z`; `None`
    /// when it runs along the plane or meets it behind the camera.
    pub fn on_plane(&self, pixel: [f64; 2], z: f64) -> Option<[f64; 3]> {
        let x = pixel[0] / self.width * 2.0 - 1.0;
        let y = 1.0 - pixel[1] / self.height * 2.0;
        let near = dehomogenise(transform(&self.inverse, [x, y, -1.0, 1.0]))?;
        let far = dehomogenise(transform(&self.inverse, [x, y, 1.0, 1.0]))?;
        let direction = [far[0] - near[0], far[1] - near[1], far[2] - near[2]];
        if direction[2].abs() < 1e-9 {
            return None;
        }
        let t = (z - near[2]) / direction[2];
        if t < 0.0 {
            return None;
        }
        Some([near[0] + t * direction[0], near[1] + t * direction[1], z])
    }

    /// The pixels a world box covers, as the rectangle around its corners' pixels; `None`
    /// when a corner is behind the camera.
    pub fn footprint(&self, low: [f64; 3], high: [f64; 3]) -> Option<Rect> {
        let mut rect = Rect::EMPTY;
        for corner in 0..8 {
            let pick = |axis: usize| {
                if corner >> axis & 1 == 0 {
                    low[axis]
                } else {
                    high[axis]
                }
            };
            rect.include(self.pixel([pick(0), pick(1), pick(2)])?);
        }
        Some(rect)
    }
}

/// An area of a picture, in pixels (x right, y down).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rect {
    pub left: f64,
    pub top: f64,
    pub right: f64,
    pub bottom: f64,
}

impl Rect {
    const EMPTY: Rect = Rect {
        left: f64::INFINITY,
        top: f64::INFINITY,
        right: f64::NEG_INFINITY,
        bottom: f64::NEG_INFINITY,
    };

    fn include(&mut self, [x, y]: [f64; 2]) {
        self.left = self.left.min(x);
        self.right = self.right.max(x);
        self.top = self.top.min(y);
        self.bottom = self.bottom.max(y);
    }

    fn contains(&self, [x, y]: [f64; 2]) -> bool {
        (self.left..=self.right).contains(&x) && (self.top..=self.bottom).contains(&y)
    }

    fn area(&self) -> f64 {
        (self.right - self.left) * (self.bottom - self.top)
    }

    /// Grown by `share` of its width and height on each side.
    fn grown(&self, share: f64) -> Rect {
        let (x, y) = (
            (self.right - self.left) * share,
            (self.bottom - self.top) * share,
        );
        Rect {
            left: self.left - x,
            top: self.top - y,
            right: self.right + x,
            bottom: self.bottom + y,
        }
    }
}

/// A patch of pixels where the render differs from its target.
#[derive(Debug, Clone, PartialEq)]
pub struct Patch {
    pub pixels: usize,
    /// The mean of its pixels' centres.
    pub centroid: [f64; 2],
}

/// A pixel differs when a channel is off by more than this share of its range: well above
/// render noise, well below an object against a table.
const DIFFERS: f64 = 0.12;

/// Patches smaller than this many pixels are noise or an edge.
const SMALLEST_PATCH: usize = 4;

/// The patches (8-connected) where `picture` differs from `target` (of one size), largest
/// first.
pub fn patches(picture: &RgbImage, target: &RgbImage) -> Vec<Patch> {
    let (width, height) = (picture.width() as usize, picture.height() as usize);
    if target.dimensions() != picture.dimensions() {
        return Vec::new();
    }
    let differs: Vec<bool> = picture
        .pixels()
        .zip(target.pixels())
        .map(|(a, b)| {
            a.0.iter()
                .zip(b.0)
                .any(|(x, y)| f64::from(x.abs_diff(y)) / 255.0 > DIFFERS)
        })
        .collect();
    let mut seen = vec![false; differs.len()];
    let mut found = Vec::new();
    for first in 0..differs.len() {
        if !differs[first] || seen[first] {
            continue;
        }
        seen[first] = true;
        let mut stack = vec![first];
        let (mut pixels, mut sum) = (0, [0.0, 0.0]);
        while let Some(at) = stack.pop() {
            let (x, y) = (at % width, at / width);
            pixels += 1;
            sum[0] += x as f64 + 0.5;
            sum[1] += y as f64 + 0.5;
            for (dx, dy) in NEIGHBOURS {
                let (nx, ny) = (x as i64 + dx, y as i64 + dy);
                if nx < 0 || ny < 0 || nx >= width as i64 || ny >= height as i64 {
                    continue;
                }
                let next = ny as usize * width + nx as usize;
                if differs[next] && !seen[next] {
                    seen[next] = true;
                    stack.push(next);
                }
            }
        }
        if pixels >= SMALLEST_PATCH {
            found.push(Patch {
                pixels,
                centroid: [sum[0] / pixels as f64, sum[1] / pixels as f64],
            });
        }
    }
    found.sort_by_key(|patch| std::cmp::Reverse(patch.pixels));
    found
}

const NEIGHBOURS: [(i64, i64); 8] = [
    (-1, -1),
    (0, -1),
    (1, -1),
    (-1, 0),
    (1, 0),
    (-1, 1),
    (0, 1),
    (1, 1),
];

/// The numbers of a program that place one object: the three literals of a tuple on a line
/// that sets a `location` (`mug.location = (0.1, -0.2, 0.5)`), none of them pinned or left
/// out of the search (`movable`).
pub fn location_tuples(code: &str, literals: &[Literal], movable: &[bool]) -> Vec<[usize; 3]> {
    let lines: Vec<&str> = code.lines().collect();
    let mut tuples = Vec::new();
    let mut index = 0;
    while index + 2 < literals.len() {
        let group = [index, index + 1, index + 2];
        let first = &literals[index];
        let same_tuple = first.bracket.is_some()
            && group.iter().all(|&i| literals[i].bracket == first.bracket)
            && literals
                .get(index + 3)
                .is_none_or(|next| next.bracket != first.bracket)
            && (index == 0 || literals[index - 1].bracket != first.bracket);
        let sets_location = lines
            .get(first.line - 1)
            .is_some_and(|line| sets_location(line));
        if same_tuple && sets_location && group.iter().all(|&i| movable[i]) {
            tuples.push(group);
            index += 3;
        } else {
            index += 1;
        }
    }
    tuples
}

/// Whether a program line assigns an object's location (not a `location` read or compared).
fn sets_location(line: &str) -> bool {
    let code = line.split('#').next().unwrap_or_default();
    code.split_once('=').is_some_and(|(left, right)| {
        left.trim_end().ends_with(".location") && !right.starts_with('=')
    })
}

/// One object a location tuple places, as the scene showed it: its world box, and how its
/// box's centre moves on the ground per unit of the tuple's first two numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct Placed {
    pub tuple: [usize; 3],
    pub low: [f64; 3],
    pub high: [f64; 3],
    /// Columns: the world (x, y) shift per unit of the tuple's first and second number.
    pub shift: [[f64; 2]; 2],
}

/// The most moves one look at the pictures suggests.
const MOST_SUGGESTIONS: usize = 9;

/// How many patches each object is tried at.
const PATCHES_PER_OBJECT: usize = 3;

/// Moves that would put each placed object where a patch of difference is (largest patches
/// first, alternating objects), turned into its tuple's numbers: the line of sight through
/// the patch's middle, on the level plane through the object's middle, is where the
/// object's middle goes. A patch holds more than the object (its shadow), so when the object
/// has a patch of its own of about the same size (it differs where it stands, shadow and
/// all: a patch whose middle is within half the object's size of its box in the picture),
/// the offset of that patch's middle from the object's is taken off the aim; one much
/// smaller is the object half hidden, whose offset says nothing. Patches near the object are
/// where it is, not where it belongs; patches of another size than the object would show
/// ([`fits`]) are something else.
pub fn suggestions(
    projection: &Projection,
    patches: &[Patch],
    placed: &[Placed],
    values: &[f64],
) -> Vec<Vec<(usize, f64)>> {
    let mut per_object: Vec<Vec<Vec<(usize, f64)>>> = Vec::new();
    for object in placed {
        let centre: [f64; 3] =
            std::array::from_fn(|axis| (object.low[axis] + object.high[axis]) * 0.5);
        let (Some(footprint), Some(seen_at)) = (
            projection.footprint(object.low, object.high),
            projection.pixel(centre),
        ) else {
            continue;
        };
        let near = footprint.grown(0.5);
        let own = patches.iter().find(|patch| near.contains(patch.centroid));
        let moves = patches
            .iter()
            .filter(|patch| !near.contains(patch.centroid))
            .filter(|patch| fits(patch, &footprint))
            .filter_map(|patch| {
                let offset = own
                    .filter(|own| alike_in_size(own.pixels, patch.pixels))
                    .map_or([0.0, 0.0], |own| {
                        [own.centroid[0] - seen_at[0], own.centroid[1] - seen_at[1]]
                    });
                let aim = [patch.centroid[0] - offset[0], patch.centroid[1] - offset[1]];
                projection.on_plane(aim, centre[2])
            })
            .filter_map(|to| {
                let (dx, dy) = solve(object.shift, [to[0] - centre[0], to[1] - centre[1]])?;
                let [x, y, _] = object.tuple;
                Some(vec![
                    (x, to_millimetre(values[x] + dx)),
                    (y, to_millimetre(values[y] + dy)),
                ])
            })
            .take(PATCHES_PER_OBJECT)
            .collect();
        per_object.push(moves);
    }
    let mut interleaved = Vec::new();
    for rank in 0..PATCHES_PER_OBJECT {
        for moves in &per_object {
            if let Some(one) = moves.get(rank) {
                interleaved.push(one.clone());
            }
        }
    }
    interleaved.truncate(MOST_SUGGESTIONS);
    interleaved
}

/// Whether a patch is of a size the object seen in `footprint` makes: from a quarter of its
/// box in the picture (the box is larger than the object, and the object may stand half
/// hidden) to twice it (with its shadow). A patch much larger is another object's change.
fn fits(patch: &Patch, footprint: &Rect) -> bool {
    let pixels = patch.pixels as f64;
    let area = footprint.area().max(1.0);
    (0.25 * area..=2.0 * area).contains(&pixels)
}

/// Two patches an object makes alike (within a third of the larger): neither is the object
/// half hidden.
fn alike_in_size(a: usize, b: usize) -> bool {
    a.abs_diff(b) * 3 <= a.max(b)
}

/// A suggested number rounded to a thousandth (a millimetre on a metre): the pictures do not
/// tell it finer, and the program stays readable.
fn to_millimetre(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}

/// The numbers (a, b) with `a * columns[0] + b * columns[1] = goal`; `None` when the
/// columns do not span the ground (the tuple does not move the object across it).
fn solve(columns: [[f64; 2]; 2], goal: [f64; 2]) -> Option<(f64, f64)> {
    let [[a, c], [b, d]] = columns;
    let determinant = a * d - b * c;
    if determinant.abs() < 1e-9 {
        return None;
    }
    Some((
        (goal[0] * d - b * goal[1]) / determinant,
        (a * goal[1] - c * goal[0]) / determinant,
    ))
}

fn transform(matrix: &[[f64; 4]; 4], vector: [f64; 4]) -> [f64; 4] {
    let mut out = [0.0; 4];
    for (row, slot) in matrix.iter().zip(&mut out) {
        *slot = row.iter().zip(vector).map(|(m, v)| m * v).sum();
    }
    out
}

fn dehomogenise(point: [f64; 4]) -> Option<[f64; 3]> {
    (point[3].abs() > 1e-12).then(|| {
        [
            point[0] / point[3],
            point[1] / point[3],
            point[2] / point[3],
        ]
    })
}

/// Gauss-Jordan inversion with partial pivoting; `None` for a singular matrix.
fn invert(matrix: &[[f64; 4]; 4]) -> Option<[[f64; 4]; 4]> {
    let mut left = *matrix;
    let mut right = [[0.0; 4]; 4];
    for (i, row) in right.iter_mut().enumerate() {
        row[i] = 1.0;
    }
    for column in 0..4 {
        let pivot =
            (column..4).max_by(|&a, &b| left[a][column].abs().total_cmp(&left[b][column].abs()))?;
        if left[pivot][column].abs() < 1e-12 {
            return None;
        }
        left.swap(column, pivot);
        right.swap(column, pivot);
        let scale = left[column][column];
        for k in 0..4 {
            left[column][k] /= scale;
            right[column][k] /= scale;
        }
        for row in 0..4 {
            if row == column {
                continue;
            }
            let factor = left[row][column];
            for k in 0..4 {
                left[row][k] -= factor * left[column][k];
                right[row][k] -= factor * right[column][k];
            }
        }
    }
    Some(right)
}

#[cfg(test)]
mod tests {
    use image::Rgb;

    use super::*;
    use crate::refine::numeric_literals;

    /// A camera 10 m above the origin looking straight down, a 90-degree-ish view (focal
    /// factor 2), into a 64-pixel square picture.
    fn overhead() -> Projection {
        let (near, far) = (0.1, 100.0);
        let projection = [
            [2.0, 0.0, 0.0, 0.0],
            [0.0, 2.0, 0.0, 0.0],
            [
                0.0,
                0.0,
                (far + near) / (near - far),
                2.0 * far * near / (near - far),
            ],
            [0.0, 0.0, -1.0, 0.0],
        ];
        let view = [
            [1.0, 0.0, 0.0, 0.0],
            [0.0, 1.0, 0.0, 0.0],
            [0.0, 0.0, 1.0, -10.0],
            [0.0, 0.0, 0.0, 1.0],
        ];
        let mut matrix = [[0.0; 4]; 4];
        for (row, out) in matrix.iter_mut().enumerate() {
            for (column, slot) in out.iter_mut().enumerate() {
                *slot = (0..4).map(|k| projection[row][k] * view[k][column]).sum();
            }
        }
        Projection::new(matrix, 64, 64).unwrap()
    }

    fn near(a: [f64; 3], b: [f64; 3]) -> bool {
        a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6)
    }

    #[test]
    fn a_pixel_seen_goes_back_to_the_point_on_its_plane() {
        let camera = overhead();
        let pixel = camera.pixel([1.0, 0.5, 0.0]).unwrap();
        assert!(
            (pixel[0] - 38.4).abs() < 1e-9 && (pixel[1] - 28.8).abs() < 1e-9,
            "{pixel:?}"
        );
        assert!(near(camera.on_plane(pixel, 0.0).unwrap(), [1.0, 0.5, 0.0]));
        assert_eq!(camera.pixel([0.0, 0.0, 20.0]), None, "behind the camera");
        assert_eq!(
            camera.on_plane(pixel, 20.0),
            None,
            "a plane behind the camera"
        );
        assert_eq!(Projection::new([[0.0; 4]; 4], 64, 64), None);
    }

    /// A grey picture with dark squares (corner, side).
    fn picture(squares: &[(u32, u32, u32)]) -> RgbImage {
        RgbImage::from_fn(64, 64, |x, y| {
            let inside = squares.iter().any(|&(sx, sy, side)| {
                (sx..sx + side).contains(&x) && (sy..sy + side).contains(&y)
            });
            if inside {
                Rgb([30, 30, 30])
            } else {
                Rgb([160, 160, 160])
            }
        })
    }

    #[test]
    fn patches_of_difference_largest_first_and_specks_left_out() {
        let rendered = picture(&[(4, 4, 6), (60, 60, 1)]);
        let target = picture(&[(40, 30, 8)]);
        let found = patches(&rendered, &target);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].pixels, 64);
        assert_eq!(found[0].centroid, [44.0, 34.0]);
        assert_eq!(found[1].pixels, 36);
        assert!(
            patches(&rendered, &RgbImage::new(32, 32)).is_empty(),
            "sizes differ"
        );
    }

    #[test]
    fn only_assigned_locations_of_three_free_numbers_are_placements() {
        let code = "mug.location = (0.1, -0.2, 0.5)\n\
                    mug.rotation_euler = (0.0, 0.0, 1.0)\n\
                    if mug.location == (1.0, 2.0, 3.0): pass\n\
                    book.location = (1.0, 2.0, 0.3)  # viga: keep\n\
                    lamp.location = (4.0, 5.0)\n\
                    bottle.location = (0.3, 0.4, 0.7)\n";
        let literals = numeric_literals(code);
        let movable: Vec<bool> = literals.iter().map(|l| !l.pinned).collect();
        let tuples = location_tuples(code, &literals, &movable);
        assert_eq!(tuples, [[0, 1, 2], [14, 15, 16]], "{literals:?}");
    }

    #[test]
    fn an_object_is_carried_to_the_patch_it_is_missing_from() {
        let camera = overhead();
        // A box 0.6 m wide at the origin whose tuple moves it one to one, and whose place
        // (a patch) shows 1 m along x and 0.5 m along y.
        let placed = Placed {
            tuple: [0, 1, 2],
            low: [-0.3, -0.3, 0.0],
            high: [0.3, 0.3, 0.2],
            shift: [[1.0, 0.0], [0.0, 1.0]],
        };
        // A patch where the object is seen at (x, y), a shadow pulling the patch's middle
        // `shadow` pixels to the right (the box is about 4 pixels wide).
        let seen = |x: f64, y: f64, shadow: f64| {
            let [px, py] = camera.pixel([x, y, 0.1]).unwrap();
            Patch {
                pixels: 20,
                centroid: [px + shadow, py],
            }
        };
        let values = [0.0, 0.0, 0.1];
        let close = |moves: &[Vec<(usize, f64)>], x: f64, y: f64| {
            moves.len() == 1
                && moves[0][0].0 == 0
                && moves[0][1].0 == 1
                && (moves[0][0].1 - x).abs() < 0.002
                && (moves[0][1].1 - y).abs() < 0.002
        };
        // Something far larger than the box changed elsewhere: not this object's place.
        let [px, py] = camera.pixel([-1.0, -1.0, 0.1]).unwrap();
        let larger = Patch {
            pixels: 500,
            centroid: [px, py],
        };
        let moves = suggestions(
            &camera,
            &[larger, seen(1.0, 0.5, 2.0), seen(0.0, 0.0, 2.0)],
            std::slice::from_ref(&placed),
            &values,
        );
        assert!(
            close(&moves, 1.0, 0.5),
            "from its own patch to the other, the shadow on both sides: {moves:?}"
        );
        // A tuple that moves the object twice as far per unit (a parent scaled by 2), and no
        // patch of its own: the middle of its box stands for where it is seen.
        let doubled = Placed {
            shift: [[2.0, 0.0], [0.0, 2.0]],
            ..placed
        };
        let moves = suggestions(&camera, &[seen(1.0, 0.5, 0.0)], &[doubled], &values);
        assert!(close(&moves, 0.5, 0.25), "{moves:?}");
    }
}
