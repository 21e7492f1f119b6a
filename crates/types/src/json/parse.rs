//! Reading JSON text the way Cassandra's Jackson `ObjectMapper` reads it into
//! untyped Java objects (`readValue(text, Object.class)`), errors included.
//!
//! What Jackson's defaults mean here:
//! - integers are `Integer`, `Long` or `BigInteger` by magnitude and every
//!   number with a fraction or exponent is a `Double` ([`Json::Int`],
//!   [`Json::Float`]; the Java class is [`Json::class_name`]);
//! - objects keep their keys in first-insertion order and a repeated key
//!   keeps its first place with its last value (`LinkedHashMap`);
//! - whatever follows a complete top-level value is ignored, except that a
//!   top-level number must be followed by white space;
//! - no comments, single quotes, `NaN`, leading `+` or leading zeros; at most
//!   1000 levels of nesting and 1000 characters per number
//!   (`StreamReadConstraints`).
//!
//! Error texts are Jackson 2.19's (`JsonError`'s `Display` is the exception's
//! `toString()`), with its line and column (1-based, in characters).

use std::fmt;

use num_bigint::BigInt;

use super::java;

/// Jackson's `StreamReadConstraints` defaults.
const MAX_DEPTH: usize = 1000;
const MAX_NUMBER_LEN: usize = 1000;

const SOURCE: &str = "[Source: REDACTED (`StreamReadFeature.INCLUDE_SOURCE_IN_LOCATION` disabled)";

/// A parsed JSON value, as the Java object Jackson would build for it.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    /// An integer (no fraction, no exponent).
    Int(BigInt),
    /// A number with a fraction or an exponent (a Java `double`; may be infinite).
    Float(f64),
    String(String),
    Array(Vec<Json>),
    /// Entries in first-insertion order, keys unique.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// The simple name of the Java class Jackson uses for the value.
    pub fn class_name(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "Boolean",
            Json::Int(i) => int_class(i),
            Json::Float(_) => "Double",
            Json::String(_) => "String",
            Json::Array(_) => "ArrayList",
            Json::Object(_) => "LinkedHashMap",
        }
    }

    /// The fully qualified name of the value's Java class.
    pub fn qualified_class_name(&self) -> String {
        let package = match self {
            Json::Array(_) | Json::Object(_) => "java.util",
            Json::Int(i) if int_class(i) == "BigInteger" => "java.math",
            _ => "java.lang",
        };
        format!("{package}.{}", self.class_name())
    }

    /// The value's Java `toString()` (`String.valueOf`): strings bare, lists
    /// as `[a, b]`, maps as `{k=v, k2=v2}`.
    pub fn java_string(&self) -> String {
        let mut out = String::new();
        self.write_java(&mut out);
        out
    }

    fn write_java(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Int(i) => out.push_str(&i.to_string()),
            Json::Float(f) => out.push_str(&java::double_to_string(*f)),
            Json::String(s) => out.push_str(s),
            Json::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    item.write_java(out);
                }
                out.push(']');
            }
            Json::Object(entries) => {
                out.push('{');
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(k);
                    out.push('=');
                    v.write_java(out);
                }
                out.push('}');
            }
        }
    }
}

/// `Integer`, `Long` or `BigInteger`: the class Jackson picks for an integer.
fn int_class(i: &BigInt) -> &'static str {
    if i32::try_from(i).is_ok() {
        "Integer"
    } else if i64::try_from(i).is_ok() {
        "Long"
    } else {
        "BigInteger"
    }
}

/// Inserts like `LinkedHashMap.put`: a present key keeps its place and takes the new value.
pub(crate) fn put(entries: &mut Vec<(String, Json)>, key: String, value: Json) {
    match entries.iter_mut().find(|(k, _)| *k == key) {
        Some(entry) => entry.1 = value,
        None => entries.push((key, value)),
    }
}

/// A Jackson exception: its class and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonError {
    /// The fully qualified exception class.
    pub class: &'static str,
    /// The message with its location (`getMessage()`).
    pub message: String,
}

impl fmt::Display for JsonError {
    /// `toString()`: class, then message.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.class, self.message)
    }
}

const PARSE: &str = "com.fasterxml.jackson.core.JsonParseException";
const EOF: &str = "com.fasterxml.jackson.core.io.JsonEOFException";
const CONSTRAINTS: &str = "com.fasterxml.jackson.core.exc.StreamConstraintsException";
const MISMATCHED: &str = "com.fasterxml.jackson.databind.exc.MismatchedInputException";
const INVALID_FORMAT: &str = "com.fasterxml.jackson.databind.exc.InvalidFormatException";

/// Parses a JSON document as `ObjectMapper.readValue(text, Object.class)`.
pub fn parse(text: &str) -> Result<Json, JsonError> {
    let mut p = Parser::new(text);
    p.root_start()?;
    let value = p.value(0)?;
    if matches!(value, Json::Int(_) | Json::Float(_)) {
        if let Some(c) = p.peek() {
            if !is_space(c) {
                return Err(p.error_at(
                    PARSE,
                    format!("Unexpected character ({}): Expected space separating root-level values", char_desc(c)),
                    p.pos,
                ));
            }
        }
    }
    Ok(value)
}

/// Parses a JSON document as `ObjectMapper.readValue(text, Map.class)` does:
/// `Ok(None)` for `null`, an error for anything but an object.
pub fn parse_object(text: &str) -> Result<Option<Vec<(String, Json)>>, JsonError> {
    let mut p = Parser::new(text);
    let start = p.root_start()?;
    let value = p.value(0)?;
    let what = match value {
        Json::Object(entries) => return Ok(Some(entries)),
        Json::Null => return Ok(None),
        Json::String(s) if s.is_empty() => {
            return Err(p.error_at(
                INVALID_FORMAT,
                "Cannot coerce empty String (\"\") to element of `java.util.LinkedHashMap` (but could if coercion was enabled using `CoercionConfig`)".to_string(),
                start,
            ))
        }
        Json::String(s) => {
            return Err(p.error_at(
                MISMATCHED,
                format!("Cannot construct instance of `java.util.LinkedHashMap` (although at least one Creator exists): no String-argument constructor/factory method to deserialize from String value ('{s}')"),
                start,
            ))
        }
        Json::Array(_) => "Array value (token `JsonToken.START_ARRAY`)",
        Json::Int(_) => "Integer value (token `JsonToken.VALUE_NUMBER_INT`)",
        Json::Float(_) => "Floating-point value (token `JsonToken.VALUE_NUMBER_FLOAT`)",
        Json::Bool(true) => "Boolean value (token `JsonToken.VALUE_TRUE`)",
        Json::Bool(false) => "Boolean value (token `JsonToken.VALUE_FALSE`)",
    };
    Err(p.error_at(
        MISMATCHED,
        format!(
            "Cannot deserialize value of type `java.util.LinkedHashMap<java.lang.Object,java.lang.Object>` from {what}"
        ),
        start,
    ))
}

fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

/// Jackson's `_getCharDesc`.
fn char_desc(c: char) -> String {
    let code = u32::from(c);
    if c.is_control() {
        format!("(CTRL-CHAR, code {code})")
    } else if code > 255 {
        format!("'{c}' (code {code} / 0x{code:x})")
    } else {
        format!("'{c}' (code {code})")
    }
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
}

impl Parser {
    fn new(text: &str) -> Parser {
        Parser { chars: text.chars().collect(), pos: 0 }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    /// `line: L, column: C` of the character at `at` (1-based, columns in characters).
    fn location(&self, at: usize) -> String {
        let before = self.chars.get(..at).unwrap_or(&self.chars);
        let line = 1 + before.iter().filter(|c| **c == '\n').count();
        let column = 1 + before.iter().rev().take_while(|c| **c != '\n').count();
        format!("line: {line}, column: {column}")
    }

    fn error_at(&self, class: &'static str, message: String, at: usize) -> JsonError {
        JsonError { class, message: format!("{message}\n at {SOURCE}; {}]", self.location(at)) }
    }

    fn unexpected(&self, c: char, expecting: &str) -> JsonError {
        self.error_at(PARSE, format!("Unexpected character ({}): {expecting}", char_desc(c)), self.pos)
    }

    /// Skips white space before a token; other control characters are errors.
    fn skip_space(&mut self) -> Result<Option<char>, JsonError> {
        while let Some(c) = self.peek() {
            if is_space(c) {
                self.pos += 1;
            } else if u32::from(c) < 0x20 {
                return Err(self.error_at(
                    PARSE,
                    format!(
                        "Illegal character ({}): only regular white space (\\r, \\n, \\t) is allowed between tokens",
                        char_desc(c)
                    ),
                    self.pos,
                ));
            } else {
                return Ok(Some(c));
            }
        }
        Ok(None)
    }

    /// Skips to the first token; an empty document is Jackson's "No content" error.
    fn root_start(&mut self) -> Result<usize, JsonError> {
        match self.skip_space()? {
            Some(_) => Ok(self.pos),
            None => Err(JsonError {
                class: MISMATCHED,
                message: format!("No content to map due to end-of-input\n at {SOURCE}; line: 1]"),
            }),
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, JsonError> {
        let Some(c) = self.skip_space()? else {
            return Err(self.error_at(EOF, "Unexpected end-of-input: expected a value".into(), self.pos));
        };
        match c {
            '{' | '[' => {
                if depth >= MAX_DEPTH {
                    return Err(JsonError {
                        class: CONSTRAINTS,
                        message: format!(
                            "Document nesting depth ({}) exceeds the maximum allowed ({MAX_DEPTH}, from `StreamReadConstraints.getMaxNestingDepth()`)",
                            depth + 1
                        ),
                    });
                }
                if c == '{' {
                    self.object(depth + 1)
                } else {
                    self.array(depth + 1)
                }
            }
            '"' => {
                self.pos += 1;
                self.string().map(Json::String)
            }
            '-' | '0'..='9' => self.number(),
            '+' => {
                self.pos += 1;
                Err(self.error_at(
                    PARSE,
                    "Unexpected character ('+' (code 43)) in numeric value: JSON spec does not allow numbers to have plus signs: enable `JsonReadFeature.ALLOW_LEADING_PLUS_SIGN_FOR_NUMBERS` to allow".into(),
                    self.pos,
                ))
            }
            c if c.is_alphanumeric() || c == '_' || c == '$' => self.word(),
            c => Err(self.unexpected(
                c,
                "expected a valid value (JSON String, Number, Array, Object or token 'null', 'true' or 'false')",
            )),
        }
    }

    /// `true`, `false`, `null`, or an unrecognized token.
    fn word(&mut self) -> Result<Json, JsonError> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            self.pos += 1;
        }
        let word: String = self.chars.get(start..self.pos).unwrap_or_default().iter().collect();
        match word.as_str() {
            "true" => Ok(Json::Bool(true)),
            "false" => Ok(Json::Bool(false)),
            "null" => Ok(Json::Null),
            "NaN" | "Infinity" => Err(self.non_numeric(&word)),
            _ => Err(self.error_at(
                PARSE,
                format!("Unrecognized token '{word}': was expecting (JSON String, Number, Array, Object or token 'null', 'true' or 'false')"),
                self.pos,
            )),
        }
    }

    fn non_numeric(&self, token: &str) -> JsonError {
        self.error_at(
            PARSE,
            format!("Non-standard token '{token}': enable `JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS` to allow"),
            self.pos,
        )
    }

    fn object(&mut self, depth: usize) -> Result<Json, JsonError> {
        let start = self.pos;
        self.pos += 1;
        let mut entries: Vec<(String, Json)> = Vec::new();
        let mut first = true;
        loop {
            let Some(mut c) = self.skip_space()? else { return Err(self.unclosed("Object", start)) };
            if first && c == '}' {
                self.pos += 1;
                return Ok(Json::Object(entries));
            }
            if !first {
                match c {
                    '}' => {
                        self.pos += 1;
                        return Ok(Json::Object(entries));
                    }
                    ',' => {
                        self.pos += 1;
                        c = match self.skip_space()? {
                            Some(c) => c,
                            None => return Err(self.unclosed("Object", start)),
                        };
                    }
                    other => return Err(self.unexpected(other, "was expecting comma to separate Object entries")),
                }
            }
            first = false;
            if c != '"' {
                return Err(self.unexpected(c, "was expecting double-quote to start field name"));
            }
            self.pos += 1;
            let key = self.string()?;
            match self.skip_space()? {
                Some(':') => self.pos += 1,
                Some(other) => {
                    return Err(self.unexpected(other, "was expecting a colon to separate field name and value"))
                }
                None => return Err(self.unclosed("Object", start)),
            }
            if self.skip_space()?.is_none() {
                return Err(self.unclosed("Object", start));
            }
            let value = self.value(depth)?;
            put(&mut entries, key, value);
        }
    }

    fn array(&mut self, depth: usize) -> Result<Json, JsonError> {
        let start = self.pos;
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            let Some(c) = self.skip_space()? else { return Err(self.unclosed("Array", start)) };
            if items.is_empty() && c == ']' {
                self.pos += 1;
                return Ok(Json::Array(items));
            }
            if !items.is_empty() {
                match c {
                    ']' => {
                        self.pos += 1;
                        return Ok(Json::Array(items));
                    }
                    ',' => {
                        self.pos += 1;
                        if self.skip_space()?.is_none() {
                            return Err(self.unclosed("Array", start));
                        }
                    }
                    other => return Err(self.unexpected(other, "was expecting comma to separate Array entries")),
                }
            }
            items.push(self.value(depth)?);
        }
    }

    fn unclosed(&self, what: &str, start: usize) -> JsonError {
        self.error_at(
            EOF,
            format!(
                "Unexpected end-of-input: expected close marker for {what} (start marker at {SOURCE}; {}])",
                self.location(start)
            ),
            self.pos,
        )
    }

    /// The rest of a string after its opening quote.
    fn string(&mut self) -> Result<String, JsonError> {
        let mut out = String::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(self.error_at(
                    EOF,
                    "Unexpected end-of-input: was expecting closing quote for a string value".into(),
                    self.pos,
                ));
            };
            self.pos += 1;
            match c {
                '"' => return Ok(out),
                '\\' => out.push(self.escape()?),
                c if u32::from(c) < 0x20 => {
                    return Err(self.error_at(
                        PARSE,
                        format!(
                            "Illegal unquoted character ({}): has to be escaped using backslash to be included in string value",
                            char_desc(c)
                        ),
                        self.pos - 1,
                    ))
                }
                c => out.push(c),
            }
        }
    }

    /// One escape sequence after its backslash. A `\uXXXX` high surrogate
    /// takes a following `\uXXXX` low surrogate with it; a surrogate without
    /// its pair becomes `?`, as Java's UTF-8 encoder writes it.
    fn escape(&mut self) -> Result<char, JsonError> {
        let Some(e) = self.peek() else {
            return Err(self.error_at(EOF, "Unexpected end-of-input in character escape sequence".into(), self.pos));
        };
        self.pos += 1;
        Ok(match e {
            '"' => '"',
            '\\' => '\\',
            '/' => '/',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'u' => {
                let unit = self.hex4()?;
                if (0xD800..0xDC00).contains(&unit)
                    && self.peek() == Some('\\')
                    && self.chars.get(self.pos + 1) == Some(&'u')
                {
                    let save = self.pos;
                    self.pos += 2;
                    let low = self.hex4()?;
                    if (0xDC00..0xE000).contains(&low) {
                        let code = 0x10000 + ((u32::from(unit) - 0xD800) << 10) + (u32::from(low) - 0xDC00);
                        return Ok(char::from_u32(code).unwrap_or('?'));
                    }
                    self.pos = save;
                }
                char::from_u32(u32::from(unit)).unwrap_or('?')
            }
            other => {
                return Err(self.error_at(
                    PARSE,
                    format!("Unrecognized character escape {}", char_desc(other)),
                    self.pos - 1,
                ))
            }
        })
    }

    fn hex4(&mut self) -> Result<u16, JsonError> {
        let mut v: u16 = 0;
        for _ in 0..4 {
            let Some(c) = self.peek() else {
                return Err(self.error_at(
                    EOF,
                    "Unexpected end-of-input in character escape sequence".into(),
                    self.pos,
                ));
            };
            let Some(d) = c.to_digit(16) else {
                return Err(self.unexpected(c, "expected a hex-digit for character escape sequence"));
            };
            self.pos += 1;
            v = (v << 4) | d as u16;
        }
        Ok(v)
    }

    fn number(&mut self) -> Result<Json, JsonError> {
        let start = self.pos;
        let negative = self.peek() == Some('-');
        if negative {
            self.pos += 1;
            match self.peek() {
                Some('0'..='9') => {}
                Some('I') | Some('N') => {
                    let word_start = self.pos;
                    while self.peek().is_some_and(char::is_alphanumeric) {
                        self.pos += 1;
                    }
                    let word: String = self.chars.get(word_start..self.pos).unwrap_or_default().iter().collect();
                    if word == "Infinity" {
                        return Err(self.non_numeric("-Infinity"));
                    }
                    self.pos = word_start;
                    return Err(self.minus_not_followed());
                }
                _ => return Err(self.minus_not_followed()),
            }
        }
        let int_start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        if self.pos - int_start > 1 && self.chars.get(int_start) == Some(&'0') {
            self.pos = int_start + 1;
            return Err(self.error_at(PARSE, "Invalid numeric value: Leading zeroes not allowed".into(), self.pos));
        }
        let mut float = false;
        if self.peek() == Some('.') {
            let dot = self.pos;
            self.pos += 1;
            if !self.peek().is_some_and(|c| c.is_ascii_digit()) {
                return Err(self.in_number("Decimal point not followed by a digit", dot));
            }
            while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                self.pos += 1;
            }
            float = true;
        }
        if matches!(self.peek(), Some('e' | 'E')) {
            let marker = self.pos;
            self.pos += 1;
            if matches!(self.peek(), Some('+' | '-')) {
                self.pos += 1;
            }
            if !self.peek().is_some_and(|c| c.is_ascii_digit()) {
                return Err(self.in_number("Exponent indicator not followed by a digit", marker));
            }
            while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                self.pos += 1;
            }
            float = true;
        }
        let text: String = self.chars.get(start..self.pos).unwrap_or_default().iter().collect();
        if text.len() > MAX_NUMBER_LEN {
            return Err(JsonError {
                class: CONSTRAINTS,
                message: format!(
                    "Number value length ({}) exceeds the maximum allowed ({MAX_NUMBER_LEN}, from `StreamReadConstraints.getMaxNumberLength()`)",
                    text.len()
                ),
            });
        }
        if float {
            // Rust's parse, like Java's, rounds correctly and overflows to infinity.
            let v: f64 = text.parse().unwrap_or(f64::NAN);
            Ok(Json::Float(v))
        } else {
            text.parse::<BigInt>()
                .map(Json::Int)
                .map_err(|_| self.error_at(PARSE, format!("Invalid numeric value: {text}"), start))
        }
    }

    fn minus_not_followed(&self) -> JsonError {
        match self.peek() {
            Some(c) => self.error_at(
                PARSE,
                format!(
                    "Unexpected character ({}) in numeric value: expected digit (0-9) to follow minus sign, for valid numeric value",
                    char_desc(c)
                ),
                self.pos,
            ),
            None => self.error_at(EOF, "Unexpected end-of-input in a Number value".into(), self.pos),
        }
    }

    /// "Unexpected character (…) in numeric value: {what}", reported at `at`.
    fn in_number(&self, what: &str, at: usize) -> JsonError {
        match self.peek() {
            Some(c) => {
                self.error_at(PARSE, format!("Unexpected character ({}) in numeric value: {what}", char_desc(c)), at)
            }
            None => self.error_at(EOF, "Unexpected end-of-input in a Number value".into(), self.pos),
        }
    }
}
