//! Chamfer distance between two triangle surfaces.
//!
//! Definition (ours; the public BlenderGym evaluator never implemented CD, and the paper does
//! not say how its CD column was computed): sample `n` points on each surface, area-weighted
//! (a triangle is picked with probability proportional to its area, then a point uniformly
//! inside it), with a fixed seed; then
//! `CD(A, B) = mean_{a in A} d(a, B) + mean_{b in B} d(b, A)`, where `d(p, S)` is the
//! Euclidean distance (not squared, in scene units) from `p` to the nearest point of the
//! surface `S` itself: its nearest triangle, found through a bounding-volume hierarchy. The
//! surfaces are the world-space evaluated meshes of every rendered mesh object (see
//! [`crate::scene`]).
//!
//! Measuring to the other *surface* rather than to the other surface's *samples* removes the
//! sampling floor of point-to-point CD (two samplings of one surface are about
//! `1/sqrt(density)` apart, which point-to-point CD adds to every result): each mean is an
//! unbiased Monte Carlo estimate of the surface-to-surface integral, and identical surfaces
//! give 0 at any `n`. What is left is the Monte Carlo error of a mean of `n` distances.
//!
//! The generator is SplitMix64, written out here, so the same mesh gives the same points on
//! every platform and with every version of the `rand` crate.

/// Points per surface when the caller does not choose.
pub const DEFAULT_POINTS: usize = 10_000;
/// The sampling seed of every evaluation.
pub const SEED: u64 = 0x5EED_B1E4_D6E7;
/// Triangles per leaf of the hierarchy.
const LEAF_SIZE: usize = 4;

pub type Point = [f64; 3];
pub type Triangle = [Point; 3];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChamferError {
    #[error("the {which} surface has no area (no visible mesh faces), so CD is undefined")]
    EmptySurface { which: &'static str },
}

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast and fully specified.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1) with 53 random bits.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

fn sub(a: Point, b: Point) -> Point {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

fn dot(a: Point, b: Point) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

/// `a + s * d`.
fn along(a: Point, s: f64, d: Point) -> Point {
    [a[0] + s * d[0], a[1] + s * d[1], a[2] + s * d[2]]
}

fn triangle_area(t: &Triangle) -> f64 {
    let (u, v) = (sub(t[1], t[0]), sub(t[2], t[0]));
    let cross = [
        u[1] * v[2] - u[2] * v[1],
        u[2] * v[0] - u[0] * v[2],
        u[0] * v[1] - u[1] * v[0],
    ];
    0.5 * dot(cross, cross).sqrt()
}

/// `n` points on the surface, area-weighted; empty when the surface has no area.
pub fn sample_surface(triangles: &[Triangle], n: usize, seed: u64) -> Vec<Point> {
    let mut cumulative = Vec::with_capacity(triangles.len());
    let mut total = 0.0;
    for triangle in triangles {
        let area = triangle_area(triangle);
        // NaN areas (non-finite coordinates) count as zero rather than poisoning the sum.
        total += if area.is_finite() { area } else { 0.0 };
        cumulative.push(total);
    }
    if total <= 0.0 {
        return Vec::new();
    }
    let mut rng = SplitMix64(seed);
    (0..n)
        .map(|_| {
            let target = rng.unit() * total;
            // The first triangle whose cumulative area exceeds the target; zero-area
            // triangles are never chosen because their cumulative value equals the previous.
            let index = cumulative
                .partition_point(|&c| c <= target)
                .min(triangles.len() - 1);
            let [a, b, c] = triangles[index];
            // Uniform in the triangle: sqrt warps the first coordinate (Osada et al. 2002).
            let s = rng.unit().sqrt();
            let t = rng.unit();
            let (wa, wb, wc) = (1.0 - s, s * (1.0 - t), s * t);
            [
                wa * a[0] + wb * b[0] + wc * c[0],
                wa * a[1] + wb * b[1] + wc * c[1],
                wa * a[2] + wb * b[2] + wc * c[2],
            ]
        })
        .collect()
}

/// The point of triangle `t` nearest to `p` (Ericson, *Real-Time Collision Detection*,
/// 5.1.5: the Voronoi region of a vertex, then of an edge, else the face).
pub fn closest_point_on_triangle(p: Point, t: &Triangle) -> Point {
    let [a, b, c] = *t;
    let (ab, ac, ap) = (sub(b, a), sub(c, a), sub(p, a));
    let (d1, d2) = (dot(ab, ap), dot(ac, ap));
    if d1 <= 0.0 && d2 <= 0.0 {
        return a;
    }
    let bp = sub(p, b);
    let (d3, d4) = (dot(ab, bp), dot(ac, bp));
    if d3 >= 0.0 && d4 <= d3 {
        return b;
    }
    let vc = d1 * d4 - d3 * d2;
    if vc <= 0.0 && d1 >= 0.0 && d3 <= 0.0 {
        return along(a, d1 / (d1 - d3), ab);
    }
    let cp = sub(p, c);
    let (d5, d6) = (dot(ab, cp), dot(ac, cp));
    if d6 >= 0.0 && d5 <= d6 {
        return c;
    }
    let vb = d5 * d2 - d1 * d6;
    if vb <= 0.0 && d2 >= 0.0 && d6 <= 0.0 {
        return along(a, d2 / (d2 - d6), ac);
    }
    let va = d3 * d6 - d5 * d4;
    if va <= 0.0 && d4 - d3 >= 0.0 && d5 - d6 >= 0.0 {
        return along(b, (d4 - d3) / ((d4 - d3) + (d5 - d6)), sub(c, b));
    }
    let denom = 1.0 / (va + vb + vc);
    along(along(a, vb * denom, ab), vc * denom, ac)
}

fn distance_squared(p: Point, q: Point) -> f64 {
    let d = sub(p, q);
    dot(d, d)
}

/// One node of the hierarchy: a box around its triangles; a leaf holds `count > 0`
/// triangles from `start` in [`SurfaceIndex::order`], an inner node has its first child
/// right after it and its second at `second`.
#[derive(Debug, Clone)]
struct Node {
    lo: Point,
    hi: Point,
    start: usize,
    count: usize,
    second: usize,
}

/// Squared distance from `p` to the box `[lo, hi]` (0 inside).
fn box_distance_squared(p: Point, lo: Point, hi: Point) -> f64 {
    (0..3)
        .map(|k| {
            let d = (lo[k] - p[k]).max(p[k] - hi[k]).max(0.0);
            d * d
        })
        .sum()
}

/// A surface ready for nearest-surface queries: its triangles of positive, finite area
/// (the rest are not surface: they are never sampled and nothing is near them) in a
/// bounding-volume hierarchy split at the median centroid along the longest axis.
#[derive(Debug, Clone)]
pub struct SurfaceIndex {
    triangles: Vec<Triangle>,
    order: Vec<usize>,
    nodes: Vec<Node>,
}

impl SurfaceIndex {
    pub fn new(triangles: &[Triangle]) -> Self {
        let triangles: Vec<Triangle> = triangles
            .iter()
            .filter(|t| {
                let area = triangle_area(t);
                area.is_finite() && area > 0.0
            })
            .copied()
            .collect();
        let mut index = SurfaceIndex {
            order: (0..triangles.len()).collect(),
            nodes: Vec::with_capacity(2 * triangles.len() / LEAF_SIZE + 1),
            triangles,
        };
        if !index.triangles.is_empty() {
            index.build(0, index.triangles.len());
        }
        index
    }

    /// The triangles that count as surface.
    pub fn triangles(&self) -> &[Triangle] {
        &self.triangles
    }

    pub fn is_empty(&self) -> bool {
        self.triangles.is_empty()
    }

    /// Builds the node for `order[start..end]` and its subtree; returns the node's position.
    fn build(&mut self, start: usize, end: usize) -> usize {
        let (mut lo, mut hi) = ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]);
        let (mut clo, mut chi) = ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]);
        for &i in &self.order[start..end] {
            let t = &self.triangles[i];
            let centroid = centroid(t);
            for k in 0..3 {
                for vertex in t {
                    lo[k] = lo[k].min(vertex[k]);
                    hi[k] = hi[k].max(vertex[k]);
                }
                clo[k] = clo[k].min(centroid[k]);
                chi[k] = chi[k].max(centroid[k]);
            }
        }
        let at = self.nodes.len();
        self.nodes.push(Node {
            lo,
            hi,
            start,
            count: end - start,
            second: 0,
        });
        if end - start <= LEAF_SIZE {
            return at;
        }
        let axis = (0..3)
            .max_by(|&a, &b| (chi[a] - clo[a]).total_cmp(&(chi[b] - clo[b])))
            .unwrap_or(0);
        let middle = start + (end - start) / 2;
        let triangles = &self.triangles;
        self.order[start..end].select_nth_unstable_by(middle - start, |&x, &y| {
            centroid(&triangles[x])[axis].total_cmp(&centroid(&triangles[y])[axis])
        });
        self.nodes[at].count = 0;
        self.build(start, middle);
        let second = self.build(middle, end);
        self.nodes[at].second = second;
        at
    }

    /// Distance from `p` to the nearest point of the surface; infinite when it is empty.
    pub fn distance(&self, p: Point) -> f64 {
        let Some(root) = self.nodes.first() else {
            return f64::INFINITY;
        };
        let mut best = f64::INFINITY;
        let mut stack = vec![(0usize, box_distance_squared(p, root.lo, root.hi))];
        while let Some((at, bound)) = stack.pop() {
            if bound >= best {
                continue;
            }
            let node = &self.nodes[at];
            if node.count > 0 {
                for &i in &self.order[node.start..node.start + node.count] {
                    let t = &self.triangles[i];
                    best = best.min(distance_squared(p, closest_point_on_triangle(p, t)));
                }
                continue;
            }
            let (first, second) = (at + 1, node.second);
            let bound_of = |n: usize| {
                let node = &self.nodes[n];
                box_distance_squared(p, node.lo, node.hi)
            };
            let (d1, d2) = (bound_of(first), bound_of(second));
            // The nearer child is searched first (pushed last), so the farther is often pruned.
            if d1 <= d2 {
                stack.push((second, d2));
                stack.push((first, d1));
            } else {
                stack.push((first, d1));
                stack.push((second, d2));
            }
        }
        best.sqrt()
    }

    /// Mean distance from `n` points sampled on this surface to the surface `to`.
    fn mean_distance_to(&self, to: &SurfaceIndex, n: usize) -> f64 {
        let points = sample_surface(&self.triangles, n, SEED);
        points.iter().map(|&p| to.distance(p)).sum::<f64>() / points.len().max(1) as f64
    }
}

fn centroid(t: &Triangle) -> Point {
    [
        (t[0][0] + t[1][0] + t[2][0]) / 3.0,
        (t[0][1] + t[1][1] + t[2][1]) / 3.0,
        (t[0][2] + t[1][2] + t[2][2]) / 3.0,
    ]
}

/// CD between two indexed surfaces, `n` points sampled on each with the fixed seed.
/// Identical surfaces give exactly 0 (it is 0 by definition; the sum of per-point distances
/// would otherwise carry rounding of order 1e-16).
pub fn chamfer_indexed(
    proposal: &SurfaceIndex,
    goal: &SurfaceIndex,
    n: usize,
) -> Result<f64, ChamferError> {
    if proposal.is_empty() {
        return Err(ChamferError::EmptySurface { which: "proposal" });
    }
    if goal.is_empty() {
        return Err(ChamferError::EmptySurface { which: "goal" });
    }
    if proposal.triangles == goal.triangles {
        return Ok(0.0);
    }
    Ok(proposal.mean_distance_to(goal, n) + goal.mean_distance_to(proposal, n))
}

/// CD between a proposal surface and a goal surface, `n` points each, fixed seed.
pub fn chamfer_distance(
    proposal: &[Triangle],
    goal: &[Triangle],
    n: usize,
) -> Result<f64, ChamferError> {
    chamfer_indexed(&SurfaceIndex::new(proposal), &SurfaceIndex::new(goal), n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An axis-aligned cube of half-side `h` centred at `c`, as 12 triangles.
    fn cube(c: Point, h: f64) -> Vec<Triangle> {
        let mut triangles = Vec::new();
        for axis in 0..3 {
            let (u, v) = ((axis + 1) % 3, (axis + 2) % 3);
            for sign in [-1.0, 1.0] {
                let corner = |su: f64, sv: f64| {
                    let mut p = c;
                    p[axis] += sign * h;
                    p[u] += su * h;
                    p[v] += sv * h;
                    p
                };
                let (p00, p10, p11, p01) = (
                    corner(-1.0, -1.0),
                    corner(1.0, -1.0),
                    corner(1.0, 1.0),
                    corner(-1.0, 1.0),
                );
                triangles.push([p00, p10, p11]);
                triangles.push([p00, p11, p01]);
            }
        }
        triangles
    }

    /// A UV sphere of radius `r` at the origin with `segments` x `rings` quads.
    fn sphere(r: f64, segments: usize, rings: usize) -> Vec<Triangle> {
        let point = |i: usize, j: usize| {
            let theta = std::f64::consts::PI * j as f64 / rings as f64;
            let phi = 2.0 * std::f64::consts::PI * i as f64 / segments as f64;
            [
                r * theta.sin() * phi.cos(),
                r * theta.sin() * phi.sin(),
                r * theta.cos(),
            ]
        };
        let mut triangles = Vec::new();
        for j in 0..rings {
            for i in 0..segments {
                let (a, b, c, d) = (
                    point(i, j),
                    point(i + 1, j),
                    point(i + 1, j + 1),
                    point(i, j + 1),
                );
                triangles.push([a, b, c]);
                triangles.push([a, c, d]);
            }
        }
        triangles
    }

    #[test]
    fn sampling_is_area_weighted_deterministic_and_on_the_surface() {
        let cube = cube([0.0; 3], 1.0);
        let points = sample_surface(&cube, 60_000, SEED);
        assert_eq!(points, sample_surface(&cube, 60_000, SEED));
        assert_ne!(points, sample_surface(&cube, 60_000, SEED + 1));
        // Every point lies on a face (one coordinate at +-1, the others inside).
        let mut per_face = [0usize; 6];
        for p in &points {
            let axis = (0..3)
                .max_by(|&a, &b| p[a].abs().total_cmp(&p[b].abs()))
                .unwrap();
            assert!((p[axis].abs() - 1.0).abs() < 1e-12, "{p:?}");
            per_face[axis * 2 + usize::from(p[axis] > 0.0)] += 1;
        }
        // Equal areas, so 1/6 each, within 5 standard deviations of a binomial count.
        let expected = 10_000.0;
        for count in per_face {
            assert!((count as f64 - expected).abs() < 5.0 * 91.3, "{per_face:?}");
        }
        // A zero-area triangle is never chosen.
        let mut with_degenerate = cube.clone();
        with_degenerate.insert(0, [[5.0; 3], [5.0; 3], [5.0; 3]]);
        assert!(
            sample_surface(&with_degenerate, 1000, 1)
                .iter()
                .all(|p| p != &[5.0; 3])
        );
        assert!(sample_surface(&[[[5.0; 3]; 3]], 10, 1).is_empty());
    }

    #[test]
    fn identical_cubes_score_zero() {
        let a = cube([0.3, -0.2, 1.0], 0.7);
        assert_eq!(chamfer_distance(&a, &a.clone(), 5_000).unwrap(), 0.0);
        // The same surface with its triangles in another order, or with a degenerate
        // triangle more, is the same surface: only rounding separates it from 0.
        let mut reordered = a.clone();
        reordered.reverse();
        reordered.push([[9.0; 3]; 3]);
        let cd = chamfer_distance(&reordered, &a, 5_000).unwrap();
        assert!(cd < 1e-12, "{cd}");
    }

    #[test]
    fn the_closest_point_is_found_in_every_region_of_the_triangle() {
        let t = [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]];
        for (p, expected) in [
            ([0.2, 0.2, 5.0], [0.2, 0.2, 0.0]),   // above the face
            ([-1.0, -1.0, 0.3], [0.0, 0.0, 0.0]), // vertex a
            ([2.0, -0.5, 0.0], [1.0, 0.0, 0.0]),  // vertex b
            ([-0.2, 3.0, -1.0], [0.0, 1.0, 0.0]), // vertex c
            ([0.5, -1.0, 3.0], [0.5, 0.0, 0.0]),  // edge ab
            ([-0.3, 0.5, 0.0], [0.0, 0.5, 0.0]),  // edge ac
            ([1.0, 1.0, 0.0], [0.5, 0.5, 0.0]),   // edge bc
        ] {
            let found = closest_point_on_triangle(p, &t);
            assert!(
                distance_squared(found, expected) < 1e-24,
                "{p:?}: {found:?}"
            );
        }
    }

    /// The hierarchy must return exactly what a scan of every triangle returns: same
    /// function, same set, so the minimum is the same number.
    #[test]
    fn the_hierarchy_finds_the_same_nearest_distance_as_a_full_scan() {
        let mut rng = SplitMix64(7);
        let mut coordinate = |scale: f64| (rng.unit() - 0.5) * scale;
        let soup: Vec<Triangle> = (0..3_000)
            .map(|_| {
                let centre = [coordinate(20.0), coordinate(20.0), coordinate(20.0)];
                let vertex = |c: &mut dyn FnMut(f64) -> f64| {
                    [centre[0] + c(2.0), centre[1] + c(2.0), centre[2] + c(2.0)]
                };
                [
                    vertex(&mut coordinate),
                    vertex(&mut coordinate),
                    vertex(&mut coordinate),
                ]
            })
            .collect();
        let index = SurfaceIndex::new(&soup);
        assert_eq!(index.triangles().len(), soup.len());
        let mut queries = SplitMix64(8);
        for _ in 0..500 {
            let p = [
                (queries.unit() - 0.5) * 30.0,
                (queries.unit() - 0.5) * 30.0,
                (queries.unit() - 0.5) * 30.0,
            ];
            let scan = soup
                .iter()
                .map(|t| distance_squared(p, closest_point_on_triangle(p, t)))
                .fold(f64::INFINITY, f64::min)
                .sqrt();
            assert_eq!(index.distance(p), scan, "{p:?}");
        }
        assert_eq!(SurfaceIndex::new(&[]).distance([0.0; 3]), f64::INFINITY);
    }

    /// Mean and standard error of the distances from `n` points sampled on `from` to `to`.
    fn one_way(from: &[Triangle], to: &[Triangle], n: usize) -> (f64, f64) {
        let to = SurfaceIndex::new(to);
        let distances: Vec<f64> = sample_surface(from, n, SEED)
            .into_iter()
            .map(|p| to.distance(p))
            .collect();
        let mean = distances.iter().sum::<f64>() / n as f64;
        let variance = distances.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (n as f64 - 1.0);
        (mean, (variance / n as f64).sqrt())
    }

    /// The cube [-1, 1]^3 (A) against itself shifted by d along x (B), exactly. From A to B:
    /// on the -x face every point is d from B. On the +x face (inside B) a point is
    /// min(d, 1-|y|, 1-|z|) from B's surface, whose mean is the integral over t in [0, d] of
    /// (1-t)^2, i.e. d - d^2 + d^3/3. On the four side faces a point is 0 from B except in a
    /// strip of width d, where it is d/2 away on average: d^2/4 per face. Weighting the six
    /// faces equally: d/3 + d^3/18; B to A is the mirror image, so CD = 2d/3 + d^3/9.
    ///
    /// Point-to-surface CD has no sampling floor: with as few as 500 points it matches the
    /// integral within its Monte Carlo error, where point-to-point CD would add about
    /// 1/sqrt(density) (0.22 at 500 points on this cube, 0.04 at 15 000).
    #[test]
    fn a_shifted_cube_scores_two_thirds_of_the_shift_at_any_sampling_density() {
        let a = cube([0.0; 3], 1.0);
        for n in [500, 15_000] {
            let floor = 1.0 / (n as f64 / 24.0).sqrt();
            for d in [0.1, 0.2, 0.4] {
                let b = cube([d, 0.0, 0.0], 1.0);
                let cd = chamfer_distance(&a, &b, n).unwrap();
                let ((ab, ab_error), (ba, ba_error)) = (one_way(&a, &b, n), one_way(&b, &a, n));
                assert!((cd - (ab + ba)).abs() < 1e-12, "{cd} vs {ab} + {ba}");
                let expected = 2.0 * d / 3.0 + d * d * d / 9.0;
                let tolerance = 4.0 * ab_error.hypot(ba_error);
                assert!(
                    tolerance < floor / 4.0,
                    "the test must be able to see a floor of {floor}: tolerance {tolerance}"
                );
                assert!(
                    (cd - expected).abs() < tolerance,
                    "n={n} d={d}: {cd} vs {expected} (Monte Carlo tolerance {tolerance})"
                );
            }
        }
    }

    /// A unit sphere against the cube [-1, 1]^3 around it. Sphere to cube: a point u on the
    /// sphere lies inside the cube, 1 - max|u_i| from its surface. Cube to sphere: a point p
    /// on the cube is |p| - 1 from the sphere. Both means are computed here by a fine
    /// midpoint rule, independent of the sampler and the hierarchy.
    #[test]
    fn sphere_against_cube_matches_the_integral() {
        let steps = 600;
        let h = 2.0 / steps as f64;
        let mut cube_to_sphere = 0.0;
        // By symmetry one face (x = 1) gives the mean over the whole cube.
        for i in 0..steps {
            for j in 0..steps {
                let (y, z) = (-1.0 + (i as f64 + 0.5) * h, -1.0 + (j as f64 + 0.5) * h);
                cube_to_sphere += (1.0 + y * y + z * z).sqrt() - 1.0;
            }
        }
        cube_to_sphere /= (steps * steps) as f64;
        // Uniform on the sphere: z = cos(theta) uniform in [-1, 1], phi uniform.
        let mut sphere_to_cube = 0.0;
        for i in 0..steps {
            for j in 0..steps {
                let z = -1.0 + (i as f64 + 0.5) * h;
                let phi = std::f64::consts::PI * (j as f64 + 0.5) * h;
                let rho = (1.0 - z * z).sqrt();
                let max = (rho * phi.cos())
                    .abs()
                    .max((rho * phi.sin()).abs())
                    .max(z.abs());
                sphere_to_cube += 1.0 - max;
            }
        }
        sphere_to_cube /= (steps * steps) as f64;
        let expected = cube_to_sphere + sphere_to_cube;

        let n = 15_000;
        let ball = sphere(1.0, 128, 64);
        let boxed = cube([0.0; 3], 1.0);
        let cd = chamfer_distance(&ball, &boxed, n).unwrap();
        let (_, e1) = one_way(&ball, &boxed, n);
        let (_, e2) = one_way(&boxed, &ball, n);
        // Monte Carlo error, plus the facets of the 128x64 sphere (at most 1.2e-3 inside the
        // true sphere, half that on average).
        let tolerance = 4.0 * e1.hypot(e2) + 1e-3;
        assert!(
            (cd - expected).abs() < tolerance,
            "CD {cd}, integral {expected} (tolerance {tolerance})"
        );
        // And it is not symmetric by accident: a smaller sphere is farther away.
        assert!(chamfer_distance(&sphere(0.5, 64, 32), &boxed, n).unwrap() > cd + 0.3);
    }

    #[test]
    fn an_empty_surface_is_an_error_not_a_number() {
        let a = cube([0.0; 3], 1.0);
        assert_eq!(
            chamfer_distance(&[], &a, 100),
            Err(ChamferError::EmptySurface { which: "proposal" })
        );
        assert_eq!(
            chamfer_distance(&a, &[], 100),
            Err(ChamferError::EmptySurface { which: "goal" })
        );
    }
}
