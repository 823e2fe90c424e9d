use viga_skills::camera::{CameraMove, CanonicalView, ViewState, parse_instruction};

#[test]
fn the_fast_path_understands_common_phrases() {
    let cases: &[(&str, Option<CameraMove>)] = &[
        ("rotate left", Some(CameraMove::Orbit { degrees: -30.0 })),
        (
            "Rotate right 45 degrees",
            Some(CameraMove::Orbit { degrees: 45.0 }),
        ),
        (
            "orbit left by 90",
            Some(CameraMove::Orbit { degrees: -90.0 }),
        ),
        ("turn right", Some(CameraMove::Orbit { degrees: 30.0 })),
        ("zoom in", Some(CameraMove::Zoom { factor: 0.7 })),
        (
            "zoom out please",
            Some(CameraMove::Zoom { factor: 1.0 / 0.7 }),
        ),
        ("get closer", Some(CameraMove::Zoom { factor: 0.7 })),
        ("view from top", Some(CameraMove::View(CanonicalView::Top))),
        (
            "look from the front",
            Some(CameraMove::View(CanonicalView::Front)),
        ),
        (
            "view from the side",
            Some(CameraMove::View(CanonicalView::Right)),
        ),
        (
            "view from behind",
            Some(CameraMove::View(CanonicalView::Back)),
        ),
        ("move up", Some(CameraMove::Elevate { degrees: 15.0 })),
        ("move down 10", Some(CameraMove::Elevate { degrees: -10.0 })),
        ("orbit up", Some(CameraMove::Elevate { degrees: 15.0 })),
        ("focus on the lamp shade", None),
        ("zoom", None),
        ("rotate", None),
        ("", None),
    ];
    for (text, expected) in cases {
        assert_eq!(parse_instruction(text), *expected, "{text:?}");
    }
}

fn close(a: [f64; 3], b: [f64; 3]) -> bool {
    a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9)
}

#[test]
fn orbit_states_round_trip_through_locations() {
    let state = ViewState::looking_from([3.0, -4.0, 5.0], [0.0, 0.0, 1.0]);
    assert!(close(state.location(), [3.0, -4.0, 5.0]), "{state:?}");
    assert!((state.distance - (9.0f64 + 16.0 + 16.0).sqrt()).abs() < 1e-9);
}

#[test]
fn moves_change_only_what_they_name() {
    let start = ViewState {
        target: [1.0, 2.0, 3.0],
        distance: 10.0,
        azimuth_deg: -90.0,
        elevation_deg: 20.0,
    };
    let left = start.apply(CameraMove::Orbit { degrees: -30.0 });
    assert_eq!(
        (left.azimuth_deg, left.elevation_deg, left.distance),
        (-120.0, 20.0, 10.0)
    );
    let wrapped = start.apply(CameraMove::Orbit { degrees: -120.0 });
    assert_eq!(wrapped.azimuth_deg, 150.0, "azimuth wraps into (-180, 180]");
    let top = start.apply(CameraMove::Elevate { degrees: 200.0 });
    assert_eq!(
        top.elevation_deg, 89.0,
        "elevation is clamped below the pole"
    );
    let closer = start.apply(CameraMove::Zoom { factor: 0.5 });
    assert_eq!((closer.distance, closer.target), (5.0, start.target));
    let front = start.apply(CameraMove::View(CanonicalView::Front));
    let location = front.location();
    assert!(
        location[1] < start.target[1] && (location[0] - 1.0).abs() < 1e-9,
        "front looks from -Y: {location:?}"
    );
}

#[test]
fn canonical_directions_are_unit_vectors_on_the_right_sides() {
    for view in [
        CanonicalView::Front,
        CanonicalView::Back,
        CanonicalView::Left,
        CanonicalView::Right,
        CanonicalView::Top,
        CanonicalView::Iso,
    ] {
        let d = view.direction();
        assert!(
            ((d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt() - 1.0).abs() < 1e-9,
            "{view:?}"
        );
    }
    assert!(CanonicalView::Right.direction()[0] > 0.9);
    assert!(CanonicalView::Left.direction()[0] < -0.9);
    assert!(CanonicalView::Back.direction()[1] > 0.9);
    assert!(CanonicalView::Top.direction()[2] > 0.99);
}
