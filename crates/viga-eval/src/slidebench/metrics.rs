//! SlideBench's reference-based metrics, as AutoPresent's public evaluator defines them
//! (`evaluate/page_eval.py`, `match.py`, `metrics/`): a generated slide and its reference
//! slide are read as blocks (text shapes and pictures, [`SlideBlocks`]); blocks are paired by
//! the similarity of their texts (with a bonus for similar neighbours) in a minimum-cost
//! assignment; then
//!
//! - **match**: the area of the paired blocks over the area of all blocks of both slides;
//! - **text**: per pair, the similarity of the two texts (here: difflib's character-overlap
//!   ratio; AutoPresent's current evaluator embeds them with a sentence model, see
//!   docs/eval.md); a pair with an empty or missing text does not count;
//! - **color**: per pair, the similarity of the two fills (CIEDE2000 of two RGB fills, equal
//!   theme colours, equal pictures, two "no fill"s), and per pair once more the similarity of
//!   the two slides' own RGB backgrounds (0 when either has none). This is the colour path of
//!   `page_eval.py` run as a command (`get_shape_fill_similarity` and the backgrounds), whose
//!   `ref_eval.json` AutoPresent's `calc_score.py` reads; not that of its `eval_page`, which
//!   hands the raw fills to `get_color_similarity` and fails on text blocks (docs/eval.md);
//! - **position**: per pair, 1 minus the larger of the horizontal and vertical distances of
//!   the blocks' centres (as shares of the slide), at least 0.
//!
//! A score with nothing to average (no pair) is 100, as the evaluator reports it.

use viga_slides::{Block, BlockContent, SlideBlocks};

/// The four reference-based scores of one slide, each from 0 to 100.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReferenceScores {
    #[serde(rename = "match")]
    pub block_match: f64,
    pub text: f64,
    pub color: f64,
    pub position: f64,
}

impl ReferenceScores {
    pub fn mean(&self) -> f64 {
        (self.block_match + self.text + self.color + self.position) / 4.0
    }
}

/// The reference-based scores of `generated` against `reference`.
pub fn reference_scores(generated: &SlideBlocks, reference: &SlideBlocks) -> ReferenceScores {
    let pairs = pair_blocks(&generated.blocks, &reference.blocks);
    let mut texts = Vec::new();
    let mut colours = Vec::new();
    let mut positions = Vec::new();
    for &(g, r) in &pairs {
        let (gen_block, ref_block) = (&generated.blocks[g], &reference.blocks[r]);
        if let (Some(a), Some(b)) = (text_of(gen_block), text_of(ref_block))
            && !a.is_empty()
            && !b.is_empty()
        {
            texts.push(sequence_ratio(a, b));
        }
        colours.push(fill_similarity(&gen_block.content, &ref_block.content));
        colours.push(match (generated.background, reference.background) {
            (Some(a), Some(b)) => colour_similarity(a, b),
            _ => 0.0,
        });
        positions.push(position_similarity(gen_block, ref_block));
    }
    ReferenceScores {
        block_match: 100.0 * match_share(&generated.blocks, &reference.blocks, &pairs),
        text: percent_of_mean(&texts),
        color: percent_of_mean(&colours),
        position: percent_of_mean(&positions),
    }
}

/// The mean in percent; 100 when there is nothing to average.
fn percent_of_mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 100.0;
    }
    100.0 * values.iter().sum::<f64>() / values.len() as f64
}

fn text_of(block: &Block) -> Option<&str> {
    match &block.content {
        BlockContent::Text { text, .. } => Some(text),
        BlockContent::Image { .. } => None,
    }
}

fn area(block: &Block) -> f64 {
    block.width * block.height
}

/// The paired blocks' area over all blocks' area. Two slides without any block area match
/// fully (the evaluator divides by zero there; see docs/eval.md).
fn match_share(generated: &[Block], reference: &[Block], pairs: &[(usize, usize)]) -> f64 {
    // Folded from +0.0: an empty f64 sum is -0.0.
    let paired_area = pairs
        .iter()
        .map(|&(g, r)| area(&generated[g]) + area(&reference[r]))
        .fold(0.0, |sum, area| sum + area);
    let all_area = generated
        .iter()
        .chain(reference)
        .map(area)
        .fold(0.0, |sum, area| sum + area);
    if all_area <= 0.0 {
        return 1.0;
    }
    paired_area / all_area
}

fn position_similarity(a: &Block, b: &Block) -> f64 {
    let centre = |block: &Block| {
        (
            block.left + block.width / 2.0,
            block.top + block.height / 2.0,
        )
    };
    let ((ax, ay), (bx, by)) = (centre(a), centre(b));
    (1.0 - (ax - bx).abs().max((ay - by).abs())).max(0.0)
}

/// The similarity of two blocks' fills: pictures are equal or not; two solid RGB fills by
/// CIEDE2000; two solid theme fills by their theme colour; two "no fill"s are alike; any
/// other pair (different kinds, inherited fills) is 0.
fn fill_similarity(a: &BlockContent, b: &BlockContent) -> f64 {
    match (a, b) {
        (BlockContent::Image { image_sha1: a }, BlockContent::Image { image_sha1: b }) => {
            f64::from(u8::from(a.is_some() && a == b))
        }
        (BlockContent::Text { fill: a, .. }, BlockContent::Text { fill: b, .. }) => {
            match (a.kind.as_str(), b.kind.as_str()) {
                ("solid", "solid") => match (a.rgb, b.rgb, &a.theme, &b.theme) {
                    (Some(a), Some(b), _, _) => colour_similarity(a, b),
                    (None, None, Some(a), Some(b)) => f64::from(u8::from(a == b)),
                    _ => 0.0,
                },
                ("background", "background") => 1.0,
                _ => 0.0,
            }
        }
        _ => 0.0,
    }
}

/// 1 - ΔE₀₀/100 of two sRGB colours, at least 0.
pub fn colour_similarity(a: [u8; 3], b: [u8; 3]) -> f64 {
    (1.0 - ciede2000(srgb_to_lab(a), srgb_to_lab(b)) / 100.0).max(0.0)
}

/// CIE L*a*b* of an 8-bit sRGB colour, with D65 white (the conversion colormath makes).
pub fn srgb_to_lab(rgb: [u8; 3]) -> [f64; 3] {
    let linear = rgb.map(|channel| {
        let v = f64::from(channel) / 255.0;
        if v <= 0.04045 {
            v / 12.92
        } else {
            ((v + 0.055) / 1.055).powf(2.4)
        }
    });
    let [r, g, b] = linear;
    let x = 0.412424 * r + 0.357579 * g + 0.180464 * b;
    let y = 0.212656 * r + 0.715158 * g + 0.0721856 * b;
    let z = 0.0193324 * r + 0.119193 * g + 0.950444 * b;
    let white = [0.95047, 1.0, 1.08883];
    let f = |t: f64| {
        if t > 216.0 / 24389.0 {
            t.cbrt()
        } else {
            7.787 * t + 16.0 / 116.0
        }
    };
    let (fx, fy, fz) = (f(x / white[0]), f(y / white[1]), f(z / white[2]));
    [116.0 * fy - 16.0, 500.0 * (fx - fy), 200.0 * (fy - fz)]
}

/// The CIEDE2000 colour difference (kL = kC = kH = 1).
pub fn ciede2000(lab1: [f64; 3], lab2: [f64; 3]) -> f64 {
    let [l1, a1, b1] = lab1;
    let [l2, a2, b2] = lab2;
    let c1 = a1.hypot(b1);
    let c2 = a2.hypot(b2);
    let c_mean = (c1 + c2) / 2.0;
    let g = 0.5 * (1.0 - (c_mean.powi(7) / (c_mean.powi(7) + 25f64.powi(7))).sqrt());
    let a1p = (1.0 + g) * a1;
    let a2p = (1.0 + g) * a2;
    let c1p = a1p.hypot(b1);
    let c2p = a2p.hypot(b2);
    let hue = |b: f64, a: f64| {
        if a == 0.0 && b == 0.0 {
            0.0
        } else {
            let h = b.atan2(a).to_degrees();
            if h < 0.0 { h + 360.0 } else { h }
        }
    };
    let h1p = hue(b1, a1p);
    let h2p = hue(b2, a2p);
    let dl = l2 - l1;
    let dc = c2p - c1p;
    let dh = if c1p * c2p == 0.0 {
        0.0
    } else if (h2p - h1p).abs() <= 180.0 {
        h2p - h1p
    } else if h2p - h1p > 180.0 {
        h2p - h1p - 360.0
    } else {
        h2p - h1p + 360.0
    };
    let dh_big = 2.0 * (c1p * c2p).sqrt() * (dh.to_radians() / 2.0).sin();
    let l_mean = (l1 + l2) / 2.0;
    let cp_mean = (c1p + c2p) / 2.0;
    let hp_mean = if c1p * c2p == 0.0 {
        h1p + h2p
    } else if (h1p - h2p).abs() <= 180.0 {
        (h1p + h2p) / 2.0
    } else if h1p + h2p < 360.0 {
        (h1p + h2p + 360.0) / 2.0
    } else {
        (h1p + h2p - 360.0) / 2.0
    };
    let t = 1.0 - 0.17 * (hp_mean - 30.0).to_radians().cos()
        + 0.24 * (2.0 * hp_mean).to_radians().cos()
        + 0.32 * (3.0 * hp_mean + 6.0).to_radians().cos()
        - 0.20 * (4.0 * hp_mean - 63.0).to_radians().cos();
    let d_theta = 30.0 * (-((hp_mean - 275.0) / 25.0).powi(2)).exp();
    let rc = 2.0 * (cp_mean.powi(7) / (cp_mean.powi(7) + 25f64.powi(7))).sqrt();
    let sl = 1.0 + 0.015 * (l_mean - 50.0).powi(2) / (20.0 + (l_mean - 50.0).powi(2)).sqrt();
    let sc = 1.0 + 0.045 * cp_mean;
    let sh = 1.0 + 0.015 * cp_mean * t;
    let rt = -(2.0 * d_theta).to_radians().sin() * rc;
    ((dl / sl).powi(2) + (dc / sc).powi(2) + (dh_big / sh).powi(2) + rt * (dc / sc) * (dh_big / sh))
        .sqrt()
}

/// Pairs generated blocks with reference blocks as the evaluator does: the cost of a pair is
/// minus the similarity of their texts (0 when either has none), lowered further for a
/// similar pair by the two most similar neighbouring pairs (one row and column around it),
/// and the pairs are a minimum-cost assignment of min(n, m) of them.
pub fn pair_blocks(generated: &[Block], reference: &[Block]) -> Vec<(usize, usize)> {
    let cost: Vec<Vec<f64>> = generated
        .iter()
        .map(|g| {
            reference
                .iter()
                .map(|r| match (text_of(g), text_of(r)) {
                    (Some(a), Some(b)) => -sequence_ratio(a, b),
                    _ => 0.0,
                })
                .collect()
        })
        .collect();
    assignment(&with_neighbour_bonus(&cost))
}

/// The evaluator's context bonus with a window of 1 and a weight of 1: a pair whose cost is
/// below -0.5 gets the two lowest costs among its neighbours (the 3x3 block around it, itself
/// left out once) added.
fn with_neighbour_bonus(cost: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let rows = cost.len();
    let columns = cost.first().map_or(0, Vec::len);
    let mut adjusted = cost.to_vec();
    for i in 0..rows {
        for j in 0..columns {
            if cost[i][j] >= -0.5 {
                continue;
            }
            let mut nearby: Vec<f64> = (i.saturating_sub(1)..(i + 2).min(rows))
                .flat_map(|ni| (j.saturating_sub(1)..(j + 2).min(columns)).map(move |nj| (ni, nj)))
                .map(|(ni, nj)| cost[ni][nj])
                .collect();
            if let Some(own) = nearby.iter().position(|&value| value == cost[i][j]) {
                nearby.remove(own);
            }
            nearby.sort_by(f64::total_cmp);
            adjusted[i][j] += nearby.iter().take(2).sum::<f64>();
        }
    }
    adjusted
}

/// A minimum-cost assignment of min(rows, columns) pairs (row, column), sorted by row, found
/// by shortest augmenting paths (Crouse, "On implementing 2D rectangular assignment
/// algorithms", 2016) with the conventions scipy's `linear_sum_assignment` follows, so ties
/// go the same way: a tall matrix is solved transposed; columns are scanned from the last;
/// among equally short paths one ending at a free column wins.
pub fn assignment(cost: &[Vec<f64>]) -> Vec<(usize, usize)> {
    let rows = cost.len();
    let columns = cost.first().map_or(0, Vec::len);
    if rows == 0 || columns == 0 {
        return Vec::new();
    }
    let transposed = columns < rows;
    let (nr, nc) = if transposed {
        (columns, rows)
    } else {
        (rows, columns)
    };
    let at = |i: usize, j: usize| {
        if transposed { cost[j][i] } else { cost[i][j] }
    };
    let mut u = vec![0.0; nr];
    let mut v = vec![0.0; nc];
    let mut col_of_row: Vec<Option<usize>> = vec![None; nr];
    let mut row_of_col: Vec<Option<usize>> = vec![None; nc];
    let mut path = vec![0usize; nc];
    for current in 0..nr {
        let mut shortest = vec![f64::INFINITY; nc];
        let mut in_rows = vec![false; nr];
        let mut in_columns = vec![false; nc];
        let mut remaining: Vec<usize> = (0..nc).rev().collect();
        let mut min_value = 0.0;
        let mut i = current;
        let sink = loop {
            in_rows[i] = true;
            let mut lowest = f64::INFINITY;
            let mut chosen = 0;
            for (index, &j) in remaining.iter().enumerate() {
                let reduced = min_value + at(i, j) - u[i] - v[j];
                if reduced < shortest[j] {
                    path[j] = i;
                    shortest[j] = reduced;
                }
                if shortest[j] < lowest || (shortest[j] == lowest && row_of_col[j].is_none()) {
                    lowest = shortest[j];
                    chosen = index;
                }
            }
            min_value = lowest;
            let j = remaining[chosen];
            in_columns[j] = true;
            let last = remaining.len() - 1;
            remaining.swap(chosen, last);
            remaining.pop();
            match row_of_col[j] {
                None => break j,
                Some(row) => i = row,
            }
        };
        u[current] += min_value;
        for row in 0..nr {
            if in_rows[row]
                && row != current
                && let Some(column) = col_of_row[row]
            {
                u[row] += min_value - shortest[column];
            }
        }
        for column in 0..nc {
            if in_columns[column] {
                v[column] -= min_value - shortest[column];
            }
        }
        augment(&path, sink, current, &mut col_of_row, &mut row_of_col);
    }
    let mut pairs: Vec<(usize, usize)> = col_of_row
        .iter()
        .enumerate()
        .filter_map(|(i, j)| j.map(|j| if transposed { (j, i) } else { (i, j) }))
        .collect();
    pairs.sort_unstable();
    pairs
}

/// Flips the assignment along the shortest augmenting path found for row `current`, from
/// the free column `sink` back to `current` (`path[column]` is the row it was reached from).
fn augment(
    path: &[usize],
    sink: usize,
    current: usize,
    col_of_row: &mut [Option<usize>],
    row_of_col: &mut [Option<usize>],
) {
    let mut j = sink;
    loop {
        let i = path[j];
        row_of_col[j] = Some(i);
        let previous = col_of_row[i].replace(j);
        if i == current {
            break;
        }
        if let Some(previous) = previous {
            j = previous;
        }
    }
}

/// Python's `difflib.SequenceMatcher(None, a, b).ratio()` over characters: twice the
/// number of matched characters over the total, the matches found as the longest common
/// block and then recursively on both sides of it (Ratcliff/Obershelp), with difflib's
/// automatic junk heuristic (in a second string of 200 characters or more, a character
/// making up more than 1% of it does not start a match).
pub fn sequence_ratio(a: &str, b: &str) -> f64 {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let total = a.len() + b.len();
    if total == 0 {
        return 1.0;
    }
    let matcher = Matcher::new(&a, &b);
    2.0 * matcher.matched() as f64 / total as f64
}

struct Matcher<'a> {
    a: &'a [char],
    b: &'a [char],
    /// Where each character (not a popular one) is in `b`, in order.
    b_indices: std::collections::HashMap<char, Vec<usize>>,
}

impl<'a> Matcher<'a> {
    fn new(a: &'a [char], b: &'a [char]) -> Self {
        let mut b_indices: std::collections::HashMap<char, Vec<usize>> =
            std::collections::HashMap::new();
        for (j, &c) in b.iter().enumerate() {
            b_indices.entry(c).or_default().push(j);
        }
        if b.len() >= 200 {
            let most = b.len() / 100 + 1;
            b_indices.retain(|_, indices| indices.len() <= most);
        }
        Self { a, b, b_indices }
    }

    /// The longest matching block in a[alo..ahi] and b[blo..bhi], as difflib finds it
    /// (earliest in `a`, then in `b`, among the longest), extended over popular characters.
    fn longest(&self, alo: usize, ahi: usize, blo: usize, bhi: usize) -> (usize, usize, usize) {
        let (mut best_i, mut best_j, mut best_size) = (alo, blo, 0usize);
        let mut lengths: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
        for i in alo..ahi {
            let mut next = std::collections::HashMap::new();
            if let Some(indices) = self.b_indices.get(&self.a[i]) {
                for &j in indices {
                    if j < blo {
                        continue;
                    }
                    if j >= bhi {
                        break;
                    }
                    let k = j
                        .checked_sub(1)
                        .and_then(|before| lengths.get(&before))
                        .copied()
                        .unwrap_or(0)
                        + 1;
                    next.insert(j, k);
                    if k > best_size {
                        (best_i, best_j, best_size) = (i + 1 - k, j + 1 - k, k);
                    }
                }
            }
            lengths = next;
        }
        // No character is junk here, so popular ones extend a match on both sides.
        while best_i > alo && best_j > blo && self.a[best_i - 1] == self.b[best_j - 1] {
            best_i -= 1;
            best_j -= 1;
            best_size += 1;
        }
        while best_i + best_size < ahi
            && best_j + best_size < bhi
            && self.a[best_i + best_size] == self.b[best_j + best_size]
        {
            best_size += 1;
        }
        (best_i, best_j, best_size)
    }

    /// The number of characters in all matching blocks.
    fn matched(&self) -> usize {
        let mut queue = vec![(0, self.a.len(), 0, self.b.len())];
        let mut matched = 0;
        while let Some((alo, ahi, blo, bhi)) = queue.pop() {
            let (i, j, k) = self.longest(alo, ahi, blo, bhi);
            if k == 0 {
                continue;
            }
            matched += k;
            if alo < i && blo < j {
                queue.push((alo, i, blo, j));
            }
            if i + k < ahi && j + k < bhi {
                queue.push((i + k, ahi, j + k, bhi));
            }
        }
        matched
    }
}

#[cfg(test)]
mod tests {
    use viga_slides::Fill;

    use super::*;

    #[test]
    fn sequence_ratios_are_difflibs() {
        // Values Python's difflib gives.
        assert_eq!(sequence_ratio("", ""), 1.0);
        assert_eq!(sequence_ratio("abc", ""), 0.0);
        assert!((sequence_ratio("abcd", "bcde") - 0.75).abs() < 1e-12);
        assert!(
            (sequence_ratio(
                "Language for Robots Circa 2018",
                "Language for Robots Circa 2020"
            ) - 0.9333333333333333)
                .abs()
                < 1e-12
        );
        assert!(
            (sequence_ratio(
                "private Thread currentThread;",
                "private volatile Thread currentThread;"
            ) - 0.8656716417910447)
                .abs()
                < 1e-12
        );
        // Over 200 characters, popular ones start no match (difflib's autojunk), but a
        // match at the start extends over them.
        let long = "a".repeat(250);
        assert!((sequence_ratio(&"a".repeat(10), &long) - 20.0 / 260.0).abs() < 1e-12);
        let popular = format!("{}{}", "abc".repeat(50), "x".repeat(100));
        let other = format!("{}{}", "x".repeat(120), "abc".repeat(40));
        assert_eq!(sequence_ratio(&other, &popular), 0.0);
        assert!(
            (sequence_ratio(
                "The subject of art is usually anything represented",
                "It may be a person, object, scene or event"
            ) - 0.32608695652173914)
                .abs()
                < 1e-12
        );
        assert!((sequence_ratio("Über naïve café", "uber naive cafe") - 0.8).abs() < 1e-12);
    }

    #[test]
    fn ciede2000_matches_sharmas_test_data() {
        for (lab1, lab2, expected) in [
            ([50.0, 2.6772, -79.7751], [50.0, 0.0, -82.7485], 2.0425),
            ([50.0, 3.1571, -77.2803], [50.0, 0.0, -82.7485], 2.8615),
            ([50.0, -1.0, 2.0], [50.0, 0.0, 0.0], 2.3669),
            (
                [60.2574, -34.0099, 36.2677],
                [60.4626, -34.1751, 39.4387],
                1.2644,
            ),
            (
                [22.7233, 20.0904, -46.6940],
                [23.0331, 14.9730, -42.5619],
                2.0373,
            ),
        ] {
            let found = ciede2000(lab1, lab2);
            assert!(
                (found - expected).abs() < 1e-4,
                "{lab1:?} {lab2:?}: {found}"
            );
        }
        assert_eq!(colour_similarity([10, 20, 30], [10, 20, 30]), 1.0);
        let black_white = colour_similarity([0, 0, 0], [255, 255, 255]);
        assert!(
            black_white < 1e-6,
            "ΔE00 of black and white is 100: {black_white}"
        );
        let lab = srgb_to_lab([255, 0, 0]);
        assert!(
            (lab[0] - 53.24).abs() < 0.05 && (lab[1] - 80.09).abs() < 0.1,
            "{lab:?}"
        );
    }

    #[test]
    fn assignments_are_minimal_and_break_ties_as_scipy_does() {
        let cost = vec![
            vec![4.0, 1.0, 3.0],
            vec![2.0, 0.0, 5.0],
            vec![3.0, 2.0, 2.0],
        ];
        assert_eq!(assignment(&cost), vec![(0, 1), (1, 0), (2, 2)]);
        // A constant matrix gives the identity (scipy's convention).
        assert_eq!(
            assignment(&[vec![0.0; 3], vec![0.0; 3]]),
            vec![(0, 0), (1, 1)]
        );
        // Tall: solved transposed, every column paired once.
        let tall = vec![vec![1.0, 9.0], vec![9.0, 1.0], vec![0.0, 0.0]];
        assert_eq!(assignment(&tall), vec![(1, 1), (2, 0)]);
        assert!(assignment(&[]).is_empty());
    }

    fn text(text: &str, fill: Fill, place: [f64; 4]) -> Block {
        Block {
            content: BlockContent::Text {
                text: text.to_owned(),
                fill,
            },
            left: place[0],
            top: place[1],
            width: place[2],
            height: place[3],
        }
    }

    fn solid(rgb: [u8; 3]) -> Fill {
        Fill {
            kind: "solid".to_owned(),
            rgb: Some(rgb),
            theme: None,
        }
    }

    #[test]
    fn a_slide_against_itself_and_against_an_empty_one() {
        let reference = SlideBlocks {
            blocks: vec![
                text(
                    "Quarterly results",
                    solid([31, 58, 95]),
                    [0.1, 0.1, 0.8, 0.2],
                ),
                text(
                    "Revenue grew 12%",
                    solid([255, 255, 255]),
                    [0.1, 0.4, 0.8, 0.4],
                ),
            ],
            background: Some([240, 240, 240]),
            slide_count: 1,
        };
        let same = reference_scores(&reference, &reference);
        assert_eq!(
            (same.block_match, same.text, same.color, same.position),
            (100.0, 100.0, 100.0, 100.0)
        );
        // An empty slide pairs nothing: match 0, and the others have nothing to average.
        let empty = SlideBlocks {
            blocks: Vec::new(),
            background: None,
            slide_count: 1,
        };
        let scores = reference_scores(&empty, &reference);
        assert_eq!(
            (
                scores.block_match,
                scores.text,
                scores.color,
                scores.position
            ),
            (0.0, 100.0, 100.0, 100.0)
        );
        // Inherited backgrounds count 0 in the colour score, as in the evaluator.
        let plain = SlideBlocks {
            background: None,
            ..reference.clone()
        };
        assert_eq!(reference_scores(&plain, &plain).color, 50.0);
        // A moved, recoloured, reworded block scores lower on each.
        let mut changed = reference.clone();
        changed.blocks[1] = text("Revenue fell", solid([200, 0, 0]), [0.3, 0.6, 0.6, 0.3]);
        let scores = reference_scores(&changed, &reference);
        assert_eq!(scores.block_match, 100.0, "both blocks are still paired");
        assert!(
            scores.text < 100.0 && scores.color < 100.0 && scores.position < 100.0,
            "{scores:?}"
        );
    }
}
