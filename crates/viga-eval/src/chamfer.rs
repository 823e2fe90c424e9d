//! Chamfer distance between two triangle surfaces.
//!
//! Definition (ours; the public BlenderGym evaluator never implemented CD): sample `n` points
//! on each surface, area-weighted (a triangle is picked with probability proportional to its
//! area, then a point uniformly inside it), with a fixed seed; then
//! `CD(A, B) = mean_{a in A} min_{b in B} |a - b| + mean_{b in B} min_{a in A} |a - b|`
//! (Euclidean distances, not squared, in scene units). The surfaces are the world-space
//! evaluated meshes of every rendered mesh object (see [`crate::scene`]).
//!
//! The generator is SplitMix64, written out here, so the same mesh gives the same points on
//! every platform and with every version of the `rand` crate.

use kiddo::{ImmutableKdTree, SquaredEuclidean};

/// Points per surface when the caller does not choose.
pub const DEFAULT_POINTS: usize = 10_000;
/// The sampling seed of every evaluation.
pub const SEED: u64 = 0x5EED_B1E4_D6E7;

pub type Point = [f64; 3];
pub type Triangle = [Point; 3];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChamferError {
    #[error("the {which} surface has no area (no visible mesh faces), so CD is undefined")]
    EmptySurface { which: &'static str },
    #[error("the nearest-neighbour index could not be built: {0}")]
    Index(String),
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

fn triangle_area(t: &Triangle) -> f64 {
    let (u, v) = (sub(t[1], t[0]), sub(t[2], t[0]));
    let cross = [
        u[1] * v[2] - u[2] * v[1],
        u[2] * v[0] - u[0] * v[2],
        u[0] * v[1] - u[1] * v[0],
    ];
    0.5 * (cross[0] * cross[0] + cross[1] * cross[1] + cross[2] * cross[2]).sqrt()
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

/// Mean distance from each point of `from` to its nearest neighbour in `to`.
fn mean_nearest(from: &[Point], to: &[Point]) -> Result<f64, ChamferError> {
    let tree: ImmutableKdTree<f64, 3> = ImmutableKdTree::new_from_slice(to)
        .map_err(|err| ChamferError::Index(format!("{err:?}")))?;
    let sum: f64 = from
        .iter()
        .map(|point| {
            tree.query(point)
                .nearest_one::<SquaredEuclidean<f64>>()
                .execute()
                .distance
                .sqrt()
        })
        .sum();
    Ok(sum / from.len() as f64)
}

/// Symmetric Chamfer distance of two point sets.
pub fn chamfer_points(a: &[Point], b: &[Point]) -> Result<f64, ChamferError> {
    if a.is_empty() {
        return Err(ChamferError::EmptySurface { which: "proposal" });
    }
    if b.is_empty() {
        return Err(ChamferError::EmptySurface { which: "goal" });
    }
    Ok(mean_nearest(a, b)? + mean_nearest(b, a)?)
}

/// CD between a proposal surface and a goal surface, `n` points each, fixed seed.
pub fn chamfer_distance(
    proposal: &[Triangle],
    goal: &[Triangle],
    n: usize,
) -> Result<f64, ChamferError> {
    chamfer_points(
        &sample_surface(proposal, n, SEED),
        &sample_surface(goal, n, SEED),
    )
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
    }

    /// The cube [-1, 1]^3 (A) against itself shifted by d along x (B), exactly. From A to B:
    /// on the -x face every point is d from B. On the +x face (inside B) a point is
    /// min(d, 1-|y|, 1-|z|) from B's surface, whose mean is the integral over t in [0, d] of
    /// (1-t)^2, i.e. d - d^2 + d^3/3. On the four side faces a point is 0 from B except in a
    /// strip of width d, where it is d/2 away on average: d^2/4 per face. Weighting the six
    /// faces equally: d/3 + d^3/18; B to A is the mirror image, so CD = 2d/3 + d^3/9.
    /// Finite sampling only adds distance (samples lie on the surface), at most the
    /// nearest-neighbour spacing, which we measure as the CD of the same cube sampled with
    /// two different seeds.
    #[test]
    fn a_shifted_cube_scores_two_thirds_of_the_shift() {
        let n = 15_000;
        let a = cube([0.0; 3], 1.0);
        let floor = chamfer_points(&sample_surface(&a, n, 1), &sample_surface(&a, n, 2)).unwrap();
        // Two independent uniform samplings of a surface of area 24 at density rho = n / 24:
        // the mean nearest-neighbour distance of a planar Poisson process is 1 / (2 sqrt(rho))
        // each way, so the floor should be 1 / sqrt(rho).
        let poisson = 1.0 / (n as f64 / 24.0).sqrt();
        assert!(
            (floor / poisson - 1.0).abs() < 0.1,
            "sampling floor {floor} vs {poisson}"
        );
        for d in [0.1, 0.2, 0.4] {
            let b = cube([d, 0.0, 0.0], 1.0);
            let cd = chamfer_points(&sample_surface(&a, n, 1), &sample_surface(&b, n, 2)).unwrap();
            let expected = 2.0 * d / 3.0 + d * d * d / 9.0;
            assert!(
                cd >= expected - 1e-3 && cd < expected + floor,
                "d={d}: {cd} vs {expected} (+{floor})"
            );
        }
    }

    /// A unit sphere against the cube [-1, 1]^3 around it. Sphere to cube: a point u on the
    /// sphere lies inside the cube, 1 - max|u_i| from its surface. Cube to sphere: a point p
    /// on the cube is |p| - 1 from the sphere. Both means are computed here by a fine
    /// midpoint rule, independent of the sampler and the KD-tree.
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
        let floor =
            chamfer_points(&sample_surface(&boxed, n, 1), &sample_surface(&boxed, n, 2)).unwrap();
        assert!(
            (cd - expected).abs() < floor,
            "CD {cd}, integral {expected} (sampling floor {floor})"
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
