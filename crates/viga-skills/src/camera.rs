//! Camera math for the verifier: orbit states, canonical views, and the fast path that turns
//! common natural-language camera instructions into moves without a model call.

use viga_protocol::bridge::CameraPose;

/// The camera the verifier looks through; the user's cameras are never moved.
pub const VIEW_CAMERA: &str = "viga_view_camera";

/// Where the verifier's camera is, as an orbit around a target point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ViewState {
    pub target: [f64; 3],
    pub distance: f64,
    /// Degrees from +X towards +Y (−90 looks from the front, Blender's −Y side).
    pub azimuth_deg: f64,
    /// Degrees above the horizon, kept within ±89.
    pub elevation_deg: f64,
}

impl ViewState {
    /// The unit vector from the target towards the camera.
    pub fn direction(&self) -> [f64; 3] {
        direction_of(self.azimuth_deg, self.elevation_deg)
    }

    pub fn location(&self) -> [f64; 3] {
        let d = self.direction();
        [
            self.target[0] + d[0] * self.distance,
            self.target[1] + d[1] * self.distance,
            self.target[2] + d[2] * self.distance,
        ]
    }

    pub fn pose(&self) -> CameraPose {
        CameraPose {
            camera: Some(VIEW_CAMERA.to_owned()),
            location: Some(self.location()),
            look_at: Some(self.target),
            ..CameraPose::default()
        }
    }

    /// The orbit state of a camera at `location` looking at `target`.
    pub fn looking_from(location: [f64; 3], target: [f64; 3]) -> Self {
        let offset = [
            location[0] - target[0],
            location[1] - target[1],
            location[2] - target[2],
        ];
        let distance = (offset[0].powi(2) + offset[1].powi(2) + offset[2].powi(2))
            .sqrt()
            .max(1e-6);
        let elevation_deg = (offset[2] / distance).clamp(-1.0, 1.0).asin().to_degrees();
        let azimuth_deg = offset[1].atan2(offset[0]).to_degrees();
        Self {
            target,
            distance,
            azimuth_deg,
            elevation_deg,
        }
    }

    pub fn apply(&self, change: CameraMove) -> Self {
        let mut next = *self;
        match change {
            CameraMove::Orbit { degrees } => {
                next.azimuth_deg = normalize_degrees(self.azimuth_deg + degrees)
            }
            CameraMove::Elevate { degrees } => {
                next.elevation_deg = (self.elevation_deg + degrees).clamp(-89.0, 89.0)
            }
            CameraMove::Zoom { factor } => next.distance = (self.distance * factor).max(1e-3),
            CameraMove::View(view) => {
                next.azimuth_deg = view.azimuth_deg();
                next.elevation_deg = view.elevation_deg();
            }
        }
        next
    }
}

fn direction_of(azimuth_deg: f64, elevation_deg: f64) -> [f64; 3] {
    let (az, el) = (azimuth_deg.to_radians(), elevation_deg.to_radians());
    [el.cos() * az.cos(), el.cos() * az.sin(), el.sin()]
}

fn normalize_degrees(degrees: f64) -> f64 {
    let wrapped = degrees.rem_euclid(360.0);
    if wrapped > 180.0 {
        wrapped - 360.0
    } else {
        wrapped
    }
}

/// The views the verifier starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CanonicalView {
    Front,
    Back,
    Left,
    Right,
    Top,
    Iso,
}

impl CanonicalView {
    /// The views `initialize_viewpoint` renders, in montage order.
    pub const INITIAL: [CanonicalView; 4] = [Self::Iso, Self::Front, Self::Right, Self::Top];

    pub fn name(self) -> &'static str {
        match self {
            Self::Front => "front",
            Self::Back => "back",
            Self::Left => "left",
            Self::Right => "right",
            Self::Top => "top",
            Self::Iso => "iso",
        }
    }

    pub fn azimuth_deg(self) -> f64 {
        match self {
            Self::Front | Self::Top => -90.0,
            Self::Back => 90.0,
            Self::Left => 180.0,
            Self::Right => 0.0,
            Self::Iso => -45.0,
        }
    }

    /// A little above the horizon, so floors and tops read in side views.
    pub fn elevation_deg(self) -> f64 {
        match self {
            Self::Top => 89.0,
            Self::Iso => 35.0,
            _ => 15.0,
        }
    }

    pub fn direction(self) -> [f64; 3] {
        direction_of(self.azimuth_deg(), self.elevation_deg())
    }
}

/// A camera change the fast path understands.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CameraMove {
    /// Around the target, in degrees of azimuth; positive moves the camera to its own right
    /// (counter-clockwise seen from above).
    Orbit {
        degrees: f64,
    },
    Elevate {
        degrees: f64,
    },
    /// Multiplies the distance: below 1 moves closer.
    Zoom {
        factor: f64,
    },
    View(CanonicalView),
}

const DEFAULT_ORBIT_DEG: f64 = 30.0;
const DEFAULT_ELEVATE_DEG: f64 = 15.0;
const ZOOM_IN: f64 = 0.7;

/// Recognises common phrases ("rotate left", "orbit right 45 degrees", "zoom in", "view from
/// top", "move up"); anything else returns `None` and goes to the model.
pub fn parse_instruction(instruction: &str) -> Option<CameraMove> {
    let text = instruction.trim().to_lowercase();
    let words: Vec<&str> = text
        .split(|c: char| !c.is_alphanumeric() && c != '.')
        .filter(|w| !w.is_empty())
        .collect();
    let has = |word: &str| words.contains(&word);
    let amount = words
        .iter()
        .find_map(|w| w.parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v > 0.0);
    if has("view") || has("look") || words.first() == Some(&"from") {
        for (name, view) in [
            ("top", CanonicalView::Top),
            ("above", CanonicalView::Top),
            ("front", CanonicalView::Front),
            ("back", CanonicalView::Back),
            ("behind", CanonicalView::Back),
            ("left", CanonicalView::Left),
            ("right", CanonicalView::Right),
            ("side", CanonicalView::Right),
            ("iso", CanonicalView::Iso),
            ("isometric", CanonicalView::Iso),
        ] {
            if has(name) {
                return Some(CameraMove::View(view));
            }
        }
    }
    if has("zoom") || has("closer") || has("farther") || has("further") {
        let inward = has("in") || has("closer");
        let outward = has("out") || has("farther") || has("further");
        return match (inward, outward) {
            (true, false) => Some(CameraMove::Zoom { factor: ZOOM_IN }),
            (false, true) => Some(CameraMove::Zoom {
                factor: 1.0 / ZOOM_IN,
            }),
            _ => None,
        };
    }
    if has("rotate") || has("orbit") || has("turn") || has("pan") {
        let degrees = amount.unwrap_or(DEFAULT_ORBIT_DEG);
        if has("left") {
            return Some(CameraMove::Orbit { degrees: -degrees });
        }
        if has("right") {
            return Some(CameraMove::Orbit { degrees });
        }
        if has("up") {
            return Some(CameraMove::Elevate {
                degrees: amount.unwrap_or(DEFAULT_ELEVATE_DEG),
            });
        }
        if has("down") {
            return Some(CameraMove::Elevate {
                degrees: -amount.unwrap_or(DEFAULT_ELEVATE_DEG),
            });
        }
        return None;
    }
    if has("move") || has("raise") || has("lower") || has("tilt") {
        let degrees = amount.unwrap_or(DEFAULT_ELEVATE_DEG);
        if has("up") || has("raise") {
            return Some(CameraMove::Elevate { degrees });
        }
        if has("down") || has("lower") {
            return Some(CameraMove::Elevate { degrees: -degrees });
        }
    }
    None
}
