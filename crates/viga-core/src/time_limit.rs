//! How long a whole run may take (`--time-limit`): every kind of run has one by default, so a
//! model that never finishes (a slow local model repeating itself, a verifier that never
//! concludes) cannot keep a run going for hours with nothing in its folder saying how it
//! ended. At the limit the run stops as a cancel does and ends as `time_limit`.

use std::time::Duration;

/// The default limit of a loop run (scene, static, 4D, slides, page, an eval instance).
pub const DEFAULT_RUN_TIME_LIMIT: Duration = Duration::from_secs(2 * 60 * 60);

/// Reads a `--time-limit`: a number with a unit (`90s`, `30m`, `1.5h`), a bare number of
/// seconds, or `none` (also `0`) for no limit.
pub fn parse_time_limit(text: &str) -> Result<Option<Duration>, String> {
    let trimmed = text.trim().to_ascii_lowercase();
    if trimmed == "none" {
        return Ok(None);
    }
    let (number, unit_seconds) = match trimmed.char_indices().last() {
        Some((at, 's')) => (&trimmed[..at], 1.0),
        Some((at, 'm')) => (&trimmed[..at], 60.0),
        Some((at, 'h')) => (&trimmed[..at], 3600.0),
        _ => (trimmed.as_str(), 1.0),
    };
    let seconds = number
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|seconds| seconds.is_finite() && *seconds >= 0.0)
        .ok_or_else(|| {
            format!(
                "{text:?} is not a time limit: write a number with s, m or h (90s, 30m, 2h), \
                 or none for no limit"
            )
        })?;
    if seconds == 0.0 {
        return Ok(None);
    }
    Duration::try_from_secs_f64(seconds * unit_seconds)
        .map(Some)
        .map_err(|_| format!("{text:?} is too long a time limit; use none for no limit"))
}

/// A `--time-limit` as a front end's flag reads it ([`parse_time_limit`]); `None`: no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeLimit(pub Option<Duration>);

impl std::str::FromStr for TimeLimit {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        parse_time_limit(text).map(Self)
    }
}

/// An optional duration as seconds, absent for none (`time_limit` in `args.json`).
pub mod optional_seconds {
    use std::time::Duration;

    use serde::{Deserialize as _, Deserializer, Serializer, de::Error as _};

    pub fn serialize<S: Serializer>(
        duration: &Option<Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match duration {
            Some(duration) => serializer.serialize_f64(duration.as_secs_f64()),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Duration>, D::Error> {
        Option::<f64>::deserialize(deserializer)?
            .map(|seconds| Duration::try_from_secs_f64(seconds).map_err(D::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_read_with_their_units_and_none_is_no_limit() {
        let read = |text| parse_time_limit(text).unwrap();
        assert_eq!(read("90s"), Some(Duration::from_secs(90)));
        assert_eq!(read("30m"), Some(Duration::from_secs(1800)));
        assert_eq!(read("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(read("45"), Some(Duration::from_secs(45)));
        assert_eq!(read("none"), None);
        assert_eq!(read("0"), None);
        for bad in ["", "-5m", "soon", "2d", "inf"] {
            let said = parse_time_limit(bad).unwrap_err();
            assert!(said.contains("30m"), "{bad}: {said}");
        }
    }
}
