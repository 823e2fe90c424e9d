//! The numbers of a program: its numeric literals (outside strings, comments and names),
//! where they sit (line, innermost bracket, a `# viga: keep` pin), and the program rewritten
//! with other values.

/// A number written in the program.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Literal {
    /// Byte range in the program, sign included.
    pub start: usize,
    pub end: usize,
    pub value: f64,
    /// Written without a decimal point or exponent: it stays an integer.
    pub integer: bool,
    /// The program line it is on, from 1.
    pub line: usize,
    /// Where its innermost enclosing bracket opens (byte offset), when it is inside one: the
    /// numbers of one tuple or call share it.
    pub bracket: Option<usize>,
    /// Its line carries a `# viga: keep` comment: the number is not to be moved.
    pub pinned: bool,
    /// The values the property its line sets can take, when its name says and the number
    /// starts within them ([`property_range`]): the search keeps the number inside.
    pub range: Option<(f64, f64)>,
}

/// The comment that pins the numbers of its line.
pub const KEEP_MARK: &str = "viga: keep";

fn is_identifier_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

/// The numeric literals of a Python program, outside strings and comments, not part of a name
/// (`Camera1`) and not complex (`2j`), hex or with underscores. A minus sign that can only be
/// unary (after `(`, `,`, `=`, `[`, `:` or an operator) belongs to the number.
pub fn numeric_literals(code: &str) -> Vec<Literal> {
    let bytes = code.as_bytes();
    let mut literals = Vec::new();
    let mut pinned_lines = Vec::new();
    let mut brackets: Vec<usize> = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < bytes.len() {
        let byte = bytes[i];
        match byte {
            b'\n' => line += 1,
            b'(' | b'[' | b'{' => brackets.push(i),
            b')' | b']' | b'}' => {
                brackets.pop();
            }
            _ => {}
        }
        if byte == b'#' {
            let comment_start = i;
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            if code[comment_start..i].contains(KEEP_MARK) {
                pinned_lines.push(line);
            }
            continue;
        }
        if byte == b'"' || byte == b'\'' {
            let end = skip_string(bytes, i);
            line += bytes[i..end].iter().filter(|b| **b == b'\n').count();
            i = end;
            continue;
        }
        let starts_number = byte.is_ascii_digit()
            || (byte == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit));
        let after_name =
            i > 0 && (is_identifier_byte(bytes[i - 1]) || (byte != b'.' && bytes[i - 1] == b'.'));
        if !starts_number || after_name {
            i += 1;
            continue;
        }
        let (end, integer, plain) = number_end(bytes, i);
        if !plain {
            i = end;
            continue;
        }
        let start = signed_start(bytes, i);
        if let Ok(value) = code[start..end].parse::<f64>() {
            literals.push(Literal {
                start,
                end,
                value,
                integer,
                line,
                bracket: brackets.last().copied(),
                pinned: false,
                range: None,
            });
        }
        i = end;
    }
    let lines: Vec<&str> = code.lines().collect();
    for literal in &mut literals {
        literal.pinned = pinned_lines.contains(&literal.line);
        let text = lines.get(literal.line - 1).copied().unwrap_or_default();
        literal.range =
            property_range(text).filter(|(low, high)| (*low..=*high).contains(&literal.value));
    }
    literals
}

/// The values a Blender property can take, read from the words of the line that sets it
/// (Blender's own names: `Base Color`, `Roughness`, `energy`, a shape key's `value`): colours
/// and factors lie in 0..1, amounts (energy, strength, sizes, counts) are not negative.
/// `None` for everything else (locations, rotations, offsets move freely). A line that sets
/// a location or rotation is never read as anything else.
pub fn property_range(line: &str) -> Option<(f64, f64)> {
    let code = line
        .split('#')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let says = |words: &[&str]| words.iter().any(|word| code.contains(word));
    if says(&["location", "rotation", "offset", "translation", "position"]) {
        return None;
    }
    if says(&[
        "color",
        "colour",
        "roughness",
        "metallic",
        "alpha",
        "transmission",
        "specular",
        "sheen",
        "coat",
        "factor",
        "\"fac\"",
        "key_blocks",
        "shape_keys",
        "keys[",
    ]) {
        return Some((0.0, 1.0));
    }
    if says(&[
        "energy",
        "strength",
        "power",
        "radius",
        "size",
        "scale",
        "count",
        "vertices",
        "lens",
        "samples",
        "resolution",
        "density",
        "width",
        "height",
        "depth",
        "angle",
    ]) {
        return Some((0.0, f64::INFINITY));
    }
    None
}

/// Where the number starting at `start` ends, whether it is written as an integer, and whether
/// it is a plain number that can be rewritten (not 0x1F, 1_000, 2j or 1.2.3, which are
/// skipped whole).
fn number_end(bytes: &[u8], start: usize) -> (usize, bool, bool) {
    let digits_from = |mut at: usize| {
        while at < bytes.len() && bytes[at].is_ascii_digit() {
            at += 1;
        }
        at
    };
    let mut end = digits_from(start);
    let mut integer = true;
    if end < bytes.len() && bytes[end] == b'.' {
        integer = false;
        end = digits_from(end + 1);
    }
    if end < bytes.len() && (bytes[end] == b'e' || bytes[end] == b'E') {
        let mut exponent = end + 1;
        if exponent < bytes.len() && (bytes[exponent] == b'+' || bytes[exponent] == b'-') {
            exponent += 1;
        }
        if exponent < bytes.len() && bytes[exponent].is_ascii_digit() {
            integer = false;
            end = digits_from(exponent);
        }
    }
    let continues =
        |at: usize| at < bytes.len() && (is_identifier_byte(bytes[at]) || bytes[at] == b'.');
    if !continues(end) {
        return (end, integer, true);
    }
    while continues(end) {
        end += 1;
    }
    (end, integer, false)
}

/// Where a literal starting at `digit` begins, including a unary minus.
fn signed_start(bytes: &[u8], digit: usize) -> usize {
    if digit == 0 || bytes[digit - 1] != b'-' {
        return digit;
    }
    let before = bytes[..digit - 1]
        .iter()
        .rev()
        .find(|b| !b.is_ascii_whitespace());
    match before {
        None => digit - 1,
        Some(b) if b"(,=[:+-*/<>{%".contains(b) => digit - 1,
        Some(_) => digit,
    }
}

fn skip_string(bytes: &[u8], start: usize) -> usize {
    let quote = bytes[start];
    let triple = bytes.get(start + 1) == Some(&quote) && bytes.get(start + 2) == Some(&quote);
    let mut i = start + if triple { 3 } else { 1 };
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            i += 2;
            continue;
        }
        if bytes[i] == quote {
            if !triple {
                return i + 1;
            }
            if bytes.get(i + 1) == Some(&quote) && bytes.get(i + 2) == Some(&quote) {
                return i + 3;
            }
        }
        if bytes[i] == b'\n' && !triple {
            return i + 1;
        }
        i += 1;
    }
    bytes.len()
}

/// The program with its literals replaced by `values` (same order as `literals`).
pub fn with_values(code: &str, literals: &[Literal], values: &[f64]) -> String {
    let mut out = String::with_capacity(code.len() + literals.len() * 4);
    let mut cursor = 0;
    for (literal, value) in literals.iter().zip(values) {
        out.push_str(&code[cursor..literal.start]);
        if literal.integer {
            out.push_str(&format!("{}", value.round() as i64));
        } else {
            // Shortest form that reads back exactly, always with a decimal point.
            let text = format!("{value:?}");
            out.push_str(&text);
        }
        cursor = literal.end;
    }
    out.push_str(&code[cursor..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_outside_strings_comments_and_names() {
        let code = "import bpy\nobj = bpy.data.objects['Camera1']  # move 3 units\nobj.location = (1.5, -2, 3e-1)\nx = f(-4.25, 0x1F, 1_000, 2j)\ns = \"\"\"7 8\"\"\"\nfor i in range(5): y = i-1\n";
        let found: Vec<(&str, f64, bool)> = numeric_literals(code)
            .iter()
            .map(|l| (&code[l.start..l.end], l.value, l.integer))
            .collect();
        assert_eq!(
            found,
            [
                ("1.5", 1.5, false),
                ("-2", -2.0, true),
                ("3e-1", 0.3, false),
                ("-4.25", -4.25, false),
                ("5", 5.0, true),
                ("1", 1.0, true)
            ]
        );
    }

    #[test]
    fn a_property_the_line_names_gives_its_range() {
        let ranges: Vec<Option<(f64, f64)>> = numeric_literals(
            "bsdf.inputs[\"Base Color\"].default_value = (0.5, 0.2, 0.1, 1.0)\nkey.data.energy = 3.0\nobj.location = (-1.0, 2.0, 0.5)\nkeys[\"Tall\"].value = 0.3\nsun.data.color = (2.0, 1.0, 1.0)\n",
        )
        .iter()
        .map(|literal| literal.range)
        .collect();
        let unit = Some((0.0, 1.0));
        let amount = Some((0.0, f64::INFINITY));
        assert_eq!(
            ranges,
            [
                unit, unit, unit, unit, amount, None, None, None, unit, None, unit, unit
            ],
            "a colour already past 1 has no range"
        );
    }

    #[test]
    fn rewriting_keeps_everything_else_and_integers_integral() {
        let code = "a = (1.5, -2)\nb = 'x 9'\n";
        let literals = numeric_literals(code);
        assert_eq!(
            with_values(code, &literals, &[0.25, 3.4]),
            "a = (0.25, 3)\nb = 'x 9'\n"
        );
        assert_eq!(
            with_values(code, &literals, &[1.5, -2.0]),
            code,
            "unchanged values round-trip"
        );
    }
}
