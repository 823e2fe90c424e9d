//! Small mesh files for tests that stand in for a service which makes meshes: a unit cube as
//! a self-contained GLB (binary glTF 2.0, which Blender's importer reads) or as OBJ text, and
//! a GLB with any JSON chunk for tests of the checks themselves.

/// The eight corners of a unit cube centred on the origin.
const CORNERS: [[f32; 3]; 8] = [
    [-0.5, -0.5, -0.5],
    [0.5, -0.5, -0.5],
    [0.5, 0.5, -0.5],
    [-0.5, 0.5, -0.5],
    [-0.5, -0.5, 0.5],
    [0.5, -0.5, 0.5],
    [0.5, 0.5, 0.5],
    [-0.5, 0.5, 0.5],
];

/// Its twelve triangles, counter-clockwise seen from outside.
const TRIANGLES: [[u16; 3]; 12] = [
    [0, 2, 1],
    [0, 3, 2],
    [4, 5, 6],
    [4, 6, 7],
    [0, 1, 5],
    [0, 5, 4],
    [1, 2, 6],
    [1, 6, 5],
    [2, 3, 7],
    [2, 7, 6],
    [3, 0, 4],
    [3, 4, 7],
];

/// A GLB of a unit cube whose node is called `name`.
pub fn cube_glb(name: &str) -> Vec<u8> {
    let mut bin = Vec::new();
    for corner in CORNERS {
        for value in corner {
            bin.extend(value.to_le_bytes());
        }
    }
    let positions = bin.len();
    for triangle in TRIANGLES {
        for index in triangle {
            bin.extend(index.to_le_bytes());
        }
    }
    let indices = bin.len() - positions;
    let json = format!(
        r#"{{"asset":{{"version":"2.0","generator":"viga-testkit"}},"scene":0,"scenes":[{{"nodes":[0]}}],"nodes":[{{"mesh":0,"name":{name:?}}}],"meshes":[{{"name":{name:?},"primitives":[{{"attributes":{{"POSITION":0}},"indices":1}}]}}],"buffers":[{{"byteLength":{total}}}],"bufferViews":[{{"buffer":0,"byteOffset":0,"byteLength":{positions},"target":34962}},{{"buffer":0,"byteOffset":{positions},"byteLength":{indices},"target":34963}}],"accessors":[{{"bufferView":0,"componentType":5126,"count":8,"type":"VEC3","min":[-0.5,-0.5,-0.5],"max":[0.5,0.5,0.5]}},{{"bufferView":1,"componentType":5123,"count":36,"type":"SCALAR"}}]}}"#,
        total = bin.len().next_multiple_of(4),
    );
    glb(&json, Some(&bin))
}

/// A unit cube as OBJ text with one object called `name`.
pub fn cube_obj(name: &str) -> String {
    let mut text = format!("# viga-testkit cube\no {name}\n");
    for [x, y, z] in CORNERS {
        text.push_str(&format!("v {x} {y} {z}\n"));
    }
    for [a, b, c] in TRIANGLES {
        text.push_str(&format!("f {} {} {}\n", a + 1, b + 1, c + 1));
    }
    text
}

/// A GLB with `json` as its JSON chunk and `bin`, when given, as its binary chunk, each
/// padded as the format wants (spaces and zeros to four bytes).
pub fn glb(json: &str, bin: Option<&[u8]>) -> Vec<u8> {
    let mut json_chunk = json.as_bytes().to_vec();
    while !json_chunk.len().is_multiple_of(4) {
        json_chunk.push(b' ');
    }
    let bin_chunk = bin.map(|bin| {
        let mut chunk = bin.to_vec();
        while !chunk.len().is_multiple_of(4) {
            chunk.push(0);
        }
        chunk
    });
    let total = 12 + 8 + json_chunk.len() + bin_chunk.as_ref().map_or(0, |c| 8 + c.len());
    let mut bytes = b"glTF".to_vec();
    bytes.extend(2u32.to_le_bytes());
    bytes.extend((total as u32).to_le_bytes());
    bytes.extend((json_chunk.len() as u32).to_le_bytes());
    bytes.extend(b"JSON");
    bytes.extend(json_chunk);
    if let Some(chunk) = bin_chunk {
        bytes.extend((chunk.len() as u32).to_le_bytes());
        bytes.extend(b"BIN\0");
        bytes.extend(chunk);
    }
    bytes
}
