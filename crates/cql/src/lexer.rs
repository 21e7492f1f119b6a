//! The CQL lexer: turns statement text into a vector of tokens ending in `Eof`.
//!
//! It follows the token rules of Cassandra's `Lexer.g` (the facts of the
//! language, not its code): case-insensitive keywords (left to the parser,
//! which sees every unquoted word lower-cased), `"quoted"` names with `""`
//! escapes, `'strings'` with `''` escapes and `$$pg-style$$` strings, signed
//! integers and floats, durations (`1h30m`, `P1Y2M`, `PT1H`, `P1W`,
//! `P0001-02-03T04:05:06`), unquoted UUIDs, `0x` blobs, booleans, and the
//! comment forms `-- …`, `// …` and `/* … */`.
//!
//! As in Cassandra, a `-` directly followed by a digit belongs to the number
//! (`c -1` lexes as `c`, `-1`); the parser copes with that where it matters.
//! Every token records its line (1-based) and column (0-based, in characters),
//! which is what error messages print.

use crate::ParseError;

/// One lexical token and where it starts in the text.
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    /// What the token is.
    pub kind: TokenKind,
    /// Byte offset of the first character.
    pub start: usize,
    /// Byte offset just past the last character.
    pub end: usize,
    /// 1-based line of the first character.
    pub line: u32,
    /// 0-based column (in characters) of the first character.
    pub col: u32,
}

/// The kinds of token. Literal kinds keep their raw text so the binder can
/// convert them by the type they are bound to.
#[derive(Debug, Clone, PartialEq)]
pub enum TokenKind {
    /// An unquoted identifier or keyword, lower-cased.
    Word(String),
    /// A `"quoted"` identifier, case kept, `""` unescaped (may be empty).
    QuotedName(String),
    /// A string literal, quotes removed and `''` unescaped.
    Str(String),
    /// An integer literal, sign included.
    Integer(String),
    /// A floating-point literal as written, or `NaN` / `-Infinity` for the
    /// signed keyword forms.
    Float(String),
    /// A duration literal as written.
    Duration(String),
    /// An unquoted UUID as written.
    Uuid(String),
    /// A blob literal: the hex digits after `0x`.
    Hex(String),
    /// `true` or `false`.
    Boolean(bool),
    /// `?`
    QMark,
    /// Punctuation and operators.
    Symbol(Symbol),
    /// End of input; always the last token.
    Eof,
}

/// Punctuation and operator tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Symbol {
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Comma,
    Semicolon,
    Dot,
    Colon,
    Eq,
    Lt,
    Lte,
    Gt,
    Gte,
    Neq,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    PlusEq,
    MinusEq,
    /// `..`, used in collection slices.
    Range,
}

impl Symbol {
    /// The symbol as written, which is also how ANTLR names it in messages.
    pub fn text(self) -> &'static str {
        match self {
            Symbol::LParen => "(",
            Symbol::RParen => ")",
            Symbol::LBracket => "[",
            Symbol::RBracket => "]",
            Symbol::LBrace => "{",
            Symbol::RBrace => "}",
            Symbol::Comma => ",",
            Symbol::Semicolon => ";",
            Symbol::Dot => ".",
            Symbol::Colon => ":",
            Symbol::Eq => "=",
            Symbol::Lt => "<",
            Symbol::Lte => "<=",
            Symbol::Gt => ">",
            Symbol::Gte => ">=",
            Symbol::Neq => "!=",
            Symbol::Plus => "+",
            Symbol::Minus => "-",
            Symbol::Star => "*",
            Symbol::Slash => "/",
            Symbol::Percent => "%",
            Symbol::PlusEq => "+=",
            Symbol::MinusEq => "-=",
            Symbol::Range => "..",
        }
    }
}

/// Splits `src` into tokens. The result always ends with one `Eof` token.
pub fn tokenize(src: &str) -> Result<Vec<Token>, ParseError> {
    let mut lexer = Lexer { src, bytes: src.as_bytes(), pos: 0, line: 1, col: 0, tokens: Vec::new() };
    lexer.run()?;
    Ok(lexer.tokens)
}

struct Lexer<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    line: u32,
    col: u32,
    tokens: Vec<Token>,
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

impl Lexer<'_> {
    fn byte_at(&self, offset: usize) -> Option<u8> {
        self.bytes.get(self.pos + offset).copied()
    }

    /// Moves past one character, keeping line and column up to date.
    fn bump(&mut self) {
        let Some(ch) = self.src.get(self.pos..).and_then(|rest| rest.chars().next()) else {
            return;
        };
        self.pos += ch.len_utf8();
        if ch == '\n' {
            self.line = self.line.saturating_add(1);
            self.col = 0;
        } else {
            self.col = self.col.saturating_add(1);
        }
    }

    /// Moves past `n` characters that are known to be ASCII and not newlines.
    fn bump_ascii(&mut self, n: usize) {
        debug_assert!(self
            .bytes
            .get(self.pos..self.pos + n)
            .is_some_and(|s| s.iter().all(|b| b.is_ascii() && *b != b'\n')));
        self.pos += n;
        self.col = self.col.saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
    }

    fn current_char(&self) -> Option<char> {
        self.src.get(self.pos..).and_then(|rest| rest.chars().next())
    }

    fn error_here(&self, message: String) -> ParseError {
        ParseError { line: self.line, col: self.col, message }
    }

    fn char_display(&self) -> String {
        match self.current_char() {
            None => "'<EOF>'".to_string(),
            Some('\n') => "'\\n'".to_string(),
            Some('\r') => "'\\r'".to_string(),
            Some('\t') => "'\\t'".to_string(),
            Some(c) => format!("'{c}'"),
        }
    }

    fn run(&mut self) -> Result<(), ParseError> {
        loop {
            self.skip_trivia()?;
            let (start, line, col) = (self.pos, self.line, self.col);
            let Some(b) = self.byte_at(0) else {
                self.tokens.push(Token { kind: TokenKind::Eof, start, end: start, line, col });
                return Ok(());
            };
            let kind = self.lex_token(b)?;
            self.tokens.push(Token { kind, start, end: self.pos, line, col });
        }
    }

    /// Skips whitespace and comments.
    fn skip_trivia(&mut self) -> Result<(), ParseError> {
        loop {
            match (self.byte_at(0), self.byte_at(1)) {
                (Some(b' ' | b'\t' | b'\r' | b'\n'), _) => self.bump(),
                (Some(b'-'), Some(b'-')) | (Some(b'/'), Some(b'/')) => {
                    while let Some(b) = self.byte_at(0) {
                        if b == b'\n' || b == b'\r' {
                            break;
                        }
                        self.bump();
                    }
                }
                (Some(b'/'), Some(b'*')) => {
                    self.bump_ascii(2);
                    loop {
                        match (self.byte_at(0), self.byte_at(1)) {
                            (Some(b'*'), Some(b'/')) => {
                                self.bump_ascii(2);
                                break;
                            }
                            (Some(_), _) => self.bump(),
                            (None, _) => {
                                return Err(self.error_here("mismatched character '<EOF>' expecting '*'".to_string()));
                            }
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn lex_token(&mut self, b: u8) -> Result<TokenKind, ParseError> {
        if b.is_ascii_hexdigit() && self.uuid_ahead() {
            let text = self.take_ascii(36);
            return Ok(TokenKind::Uuid(text));
        }
        match b {
            b'\'' => self.lex_quoted_string(),
            b'$' if self.byte_at(1) == Some(b'$') => self.lex_dollar_string(),
            b'"' => self.lex_quoted_name(),
            b'0' if matches!(self.byte_at(1), Some(b'x' | b'X')) => {
                self.bump_ascii(2);
                let digits_len = self.run_len(0, |b| b.is_ascii_hexdigit());
                let digits = self.take_ascii(digits_len);
                Ok(TokenKind::Hex(digits))
            }
            b'0'..=b'9' => Ok(self.lex_number(false)),
            b'a'..=b'z' | b'A'..=b'Z' => Ok(self.lex_word()),
            b'-' => Ok(self.lex_minus()),
            b'?' => {
                self.bump_ascii(1);
                Ok(TokenKind::QMark)
            }
            _ => self.lex_symbol(b),
        }
    }

    fn lex_symbol(&mut self, b: u8) -> Result<TokenKind, ParseError> {
        let next = self.byte_at(1);
        let (symbol, len) = match (b, next) {
            (b'(', _) => (Symbol::LParen, 1),
            (b')', _) => (Symbol::RParen, 1),
            (b'[', _) => (Symbol::LBracket, 1),
            (b']', _) => (Symbol::RBracket, 1),
            (b'{', _) => (Symbol::LBrace, 1),
            (b'}', _) => (Symbol::RBrace, 1),
            (b',', _) => (Symbol::Comma, 1),
            (b';', _) => (Symbol::Semicolon, 1),
            (b'.', Some(b'.')) => (Symbol::Range, 2),
            (b'.', _) => (Symbol::Dot, 1),
            (b':', _) => (Symbol::Colon, 1),
            (b'=', _) => (Symbol::Eq, 1),
            (b'<', Some(b'=')) => (Symbol::Lte, 2),
            (b'<', _) => (Symbol::Lt, 1),
            (b'>', Some(b'=')) => (Symbol::Gte, 2),
            (b'>', _) => (Symbol::Gt, 1),
            (b'!', Some(b'=')) => (Symbol::Neq, 2),
            (b'+', Some(b'=')) => (Symbol::PlusEq, 2),
            (b'+', _) => (Symbol::Plus, 1),
            (b'*', _) => (Symbol::Star, 1),
            (b'/', _) => (Symbol::Slash, 1),
            (b'%', _) => (Symbol::Percent, 1),
            _ => {
                return Err(self.error_here(format!("no viable alternative at character {}", self.char_display())));
            }
        };
        self.bump_ascii(len);
        Ok(TokenKind::Symbol(symbol))
    }

    /// Length of the run of bytes matching `pred`, starting `offset` bytes ahead.
    fn run_len(&self, offset: usize, pred: impl Fn(u8) -> bool) -> usize {
        self.bytes.get(self.pos + offset..).map_or(0, |rest| rest.iter().take_while(|b| pred(**b)).count())
    }

    /// Consumes `n` ASCII bytes (no newlines) and returns them.
    fn take_ascii(&mut self, n: usize) -> String {
        let text = self.src.get(self.pos..self.pos + n).unwrap_or_default().to_string();
        self.bump_ascii(n);
        text
    }

    /// True when the next 36 bytes are an 8-4-4-4-12 hex UUID.
    fn uuid_ahead(&self) -> bool {
        let Some(candidate) = self.bytes.get(self.pos..self.pos + 36) else {
            return false;
        };
        candidate.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
    }

    fn lex_quoted_string(&mut self) -> Result<TokenKind, ParseError> {
        self.bump_ascii(1);
        let mut text = String::new();
        loop {
            match self.current_char() {
                None => return Err(self.error_here("mismatched character '<EOF>' expecting '''".to_string())),
                Some('\'') => {
                    if self.byte_at(1) == Some(b'\'') {
                        text.push('\'');
                        self.bump_ascii(2);
                    } else {
                        self.bump_ascii(1);
                        return Ok(TokenKind::Str(text));
                    }
                }
                Some(c) => {
                    text.push(c);
                    self.bump();
                }
            }
        }
    }

    fn lex_dollar_string(&mut self) -> Result<TokenKind, ParseError> {
        self.bump_ascii(2);
        let mut text = String::new();
        loop {
            match self.current_char() {
                None => return Err(self.error_here("mismatched character '<EOF>' expecting '$'".to_string())),
                Some('$') if self.byte_at(1) == Some(b'$') => {
                    self.bump_ascii(2);
                    return Ok(TokenKind::Str(text));
                }
                Some(c) => {
                    text.push(c);
                    self.bump();
                }
            }
        }
    }

    fn lex_quoted_name(&mut self) -> Result<TokenKind, ParseError> {
        self.bump_ascii(1);
        let mut text = String::new();
        loop {
            match self.current_char() {
                None => return Err(self.error_here("mismatched character '<EOF>' expecting '\"'".to_string())),
                Some('"') => {
                    if self.byte_at(1) == Some(b'"') {
                        text.push('"');
                        self.bump_ascii(2);
                    } else {
                        self.bump_ascii(1);
                        return Ok(TokenKind::QuotedName(text));
                    }
                }
                Some(c) => {
                    text.push(c);
                    self.bump();
                }
            }
        }
    }

    /// A `-`: part of a negative number, negative duration or `-NaN` /
    /// `-Infinity`, or the start of `-=`, or a plain minus.
    fn lex_minus(&mut self) -> TokenKind {
        match self.byte_at(1) {
            Some(b'0'..=b'9') => self.lex_number(true),
            Some(b'P') => {
                if let Some(len) = self.iso_duration_len(1) {
                    let text = self.take_ascii(1 + len);
                    return TokenKind::Duration(text);
                }
                self.bump_ascii(1);
                TokenKind::Symbol(Symbol::Minus)
            }
            Some(b'=') => {
                self.bump_ascii(2);
                TokenKind::Symbol(Symbol::MinusEq)
            }
            Some(b'a'..=b'z' | b'A'..=b'Z') => {
                let word_len = self.run_len(1, is_ident_byte);
                let word = self.src.get(self.pos + 1..self.pos + 1 + word_len).unwrap_or_default();
                if word.eq_ignore_ascii_case("nan") {
                    self.bump_ascii(1 + word_len);
                    return TokenKind::Float("NaN".to_string());
                }
                if word.eq_ignore_ascii_case("infinity") {
                    self.bump_ascii(1 + word_len);
                    return TokenKind::Float("-Infinity".to_string());
                }
                self.bump_ascii(1);
                TokenKind::Symbol(Symbol::Minus)
            }
            _ => {
                self.bump_ascii(1);
                TokenKind::Symbol(Symbol::Minus)
            }
        }
    }

    /// An integer, float or duration starting at the current position (after
    /// the sign when `negative`).
    fn lex_number(&mut self, negative: bool) -> TokenKind {
        let sign = usize::from(negative);
        let int_len = self.run_len(sign, |b| b.is_ascii_digit());
        let mut len = sign + int_len;
        // A duration: digits followed by a unit, repeated.
        if let Some(unit_len) = self.duration_unit_len(len) {
            len += unit_len;
            loop {
                let digits = self.run_len(len, |b| b.is_ascii_digit());
                if digits == 0 {
                    break;
                }
                match self.duration_unit_len(len + digits) {
                    Some(unit_len) => len += digits + unit_len,
                    None => break,
                }
            }
            let text = self.take_text(len);
            return TokenKind::Duration(text);
        }
        let mut is_float = false;
        if self.byte_at(len) == Some(b'.') && self.byte_at(len + 1) != Some(b'.') {
            is_float = true;
            len += 1;
            len += self.run_len(len, |b| b.is_ascii_digit());
        }
        if matches!(self.byte_at(len), Some(b'e' | b'E')) {
            let sign_len = usize::from(matches!(self.byte_at(len + 1), Some(b'+' | b'-')));
            let exp_digits = self.run_len(len + 1 + sign_len, |b| b.is_ascii_digit());
            if exp_digits > 0 {
                is_float = true;
                len += 1 + sign_len + exp_digits;
            }
        }
        let text = self.take_ascii(len);
        if is_float {
            TokenKind::Float(text)
        } else {
            TokenKind::Integer(text)
        }
    }

    /// Consumes `len` bytes that may hold non-ASCII characters (the `µ` unit).
    fn take_text(&mut self, len: usize) -> String {
        let end = self.pos + len;
        let text = self.src.get(self.pos..end).unwrap_or_default().to_string();
        while self.pos < end && self.pos < self.bytes.len() {
            self.bump();
        }
        text
    }

    /// The byte length of the duration unit at `offset`, if one is there:
    /// `y mo w d h m s ms us µs ns`, case-insensitive, longest first.
    fn duration_unit_len(&self, offset: usize) -> Option<usize> {
        let first = self.byte_at(offset)?.to_ascii_lowercase();
        let second = self.byte_at(offset + 1).map(|b| b.to_ascii_lowercase());
        match (first, second) {
            (b'm', Some(b'o' | b's')) | (b'u' | b'n', Some(b's')) => Some(2),
            // U+00B5 MICRO SIGN is 0xC2 0xB5 in UTF-8.
            (0xC2, Some(0xB5)) if matches!(self.byte_at(offset + 2), Some(b's' | b'S')) => Some(3),
            (b'y' | b'w' | b'd' | b'h' | b'm' | b's', _) => Some(1),
            _ => None,
        }
    }

    /// If an ISO 8601 duration starting with `P` begins `offset` bytes ahead,
    /// its byte length. A `P…` word that is longer than any duration reading
    /// of it is an identifier instead, as in ANTLR's longest-match rule.
    fn iso_duration_len(&self, offset: usize) -> Option<usize> {
        if self.byte_at(offset) != Some(b'P') {
            return None;
        }
        // The "alternative format": PYYYY-MM-DDThh:mm:ss.
        const ALT: &[u8] = b"P0000-00-00T00:00:00";
        if let Some(candidate) = self.bytes.get(self.pos + offset..self.pos + offset + ALT.len()) {
            let matches = candidate.iter().zip(ALT).all(|(b, pattern)| match pattern {
                b'0' => b.is_ascii_digit(),
                other => b == other,
            });
            if matches {
                return Some(ALT.len());
            }
        }
        let word_len = self.run_len(offset, is_ident_byte);
        let word = self.bytes.get(self.pos + offset..self.pos + offset + word_len)?;
        is_iso_designator_duration(word).then_some(word_len)
    }

    /// An unquoted word: a keyword, identifier, boolean, or an ISO duration
    /// such as `P1Y2M` or `PT1H`.
    fn lex_word(&mut self) -> TokenKind {
        if let Some(len) = self.iso_duration_len(0) {
            let text = self.take_ascii(len);
            return TokenKind::Duration(text);
        }
        let len = self.run_len(0, is_ident_byte);
        let text = self.take_ascii(len).to_ascii_lowercase();
        match text.as_str() {
            "true" => TokenKind::Boolean(true),
            "false" => TokenKind::Boolean(false),
            _ => TokenKind::Word(text),
        }
    }
}

/// True for `P` followed by ISO 8601 designators: `nY nM nD`, then optionally
/// `T nH nM nS` (each part optional but in order, at least one overall), or
/// `nW` alone. Designators are upper-case, as in Cassandra's lexer.
fn is_iso_designator_duration(word: &[u8]) -> bool {
    let Some((b'P', rest)) = word.split_first() else {
        return false;
    };
    let (date, time) = match rest.iter().position(|b| *b == b'T') {
        Some(t) => (rest.get(..t).unwrap_or_default(), Some(rest.get(t + 1..).unwrap_or_default())),
        None => (rest, None),
    };
    if let Some(digits_len) = date.iter().position(|b| *b == b'W') {
        return time.is_none()
            && digits_len > 0
            && digits_len + 1 == date.len()
            && date.iter().take(digits_len).all(u8::is_ascii_digit);
    }
    let date_ok = designators_in_order(date, b"YMD");
    let time_ok = match time {
        None => true,
        Some(time) => !time.is_empty() && designators_in_order(time, b"HMS"),
    };
    date_ok && time_ok && !(date.is_empty() && time.is_none())
}

/// True when `part` is a sequence of `digits designator` groups whose
/// designators appear in `order`, each at most once.
fn designators_in_order(mut part: &[u8], order: &[u8]) -> bool {
    let mut next_allowed = 0;
    while !part.is_empty() {
        let digits = part.iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            return false;
        }
        let Some(designator) = part.get(digits) else {
            return false;
        };
        let Some(index) = order.iter().position(|d| d == designator) else {
            return false;
        };
        if index < next_allowed {
            return false;
        }
        next_allowed = index + 1;
        part = part.get(digits + 1..).unwrap_or_default();
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<TokenKind> {
        tokenize(src).unwrap().into_iter().map(|t| t.kind).collect()
    }

    fn word(s: &str) -> TokenKind {
        TokenKind::Word(s.to_string())
    }

    #[test]
    fn words_are_lower_cased_and_quoted_names_keep_case() {
        assert_eq!(
            kinds(r#"SELECT "MyCol", "a""b" FroM"#),
            vec![
                word("select"),
                TokenKind::QuotedName("MyCol".into()),
                TokenKind::Symbol(Symbol::Comma),
                TokenKind::QuotedName("a\"b".into()),
                word("from"),
                TokenKind::Eof
            ]
        );
    }

    #[test]
    fn strings() {
        assert_eq!(
            kinds("'it''s' $$a'b$c$$"),
            vec![TokenKind::Str("it's".into()), TokenKind::Str("a'b$c".into()), TokenKind::Eof]
        );
        assert_eq!(tokenize("'abc").unwrap_err().to_string(), "line 1:4 mismatched character '<EOF>' expecting '''");
    }

    #[test]
    fn numbers() {
        assert_eq!(
            kinds("1 -2 3.5 -4.5e10 1e5 1. 2..3"),
            vec![
                TokenKind::Integer("1".into()),
                TokenKind::Integer("-2".into()),
                TokenKind::Float("3.5".into()),
                TokenKind::Float("-4.5e10".into()),
                TokenKind::Float("1e5".into()),
                TokenKind::Float("1.".into()),
                TokenKind::Integer("2".into()),
                TokenKind::Symbol(Symbol::Range),
                TokenKind::Integer("3".into()),
                TokenKind::Eof
            ]
        );
        assert_eq!(
            kinds("NaN -NaN Infinity -infinity"),
            vec![
                word("nan"),
                TokenKind::Float("NaN".into()),
                word("infinity"),
                TokenKind::Float("-Infinity".into()),
                TokenKind::Eof
            ]
        );
    }

    #[test]
    fn durations() {
        for text in [
            "1h30m",
            "3mo2d",
            "1y",
            "-1d",
            "12ms",
            "5us",
            "5µs",
            "7ns",
            "P1Y2M",
            "PT1H",
            "P1W",
            "P0001-02-03T04:05:06",
            "-P2D",
            "P1DT2H3M4S",
        ] {
            assert_eq!(kinds(text), vec![TokenKind::Duration(text.into()), TokenKind::Eof], "{text}");
        }
        assert_eq!(kinds("P1Yx"), vec![word("p1yx"), TokenKind::Eof]);
        assert_eq!(kinds("PT"), vec![word("pt"), TokenKind::Eof]);
        assert_eq!(kinds("p1y"), vec![word("p1y"), TokenKind::Eof]);
        assert_eq!(kinds("P1M1Y"), vec![word("p1m1y"), TokenKind::Eof]);
        assert_eq!(
            kinds("1h30"),
            vec![TokenKind::Duration("1h".into()), TokenKind::Integer("30".into()), TokenKind::Eof]
        );
    }

    #[test]
    fn uuids_hex_and_booleans() {
        assert_eq!(
            kinds("123e4567-e89b-12d3-a456-426614174000 deadbeef-0000-0000-0000-000000000000 0xCAFE 0x TRUE false"),
            vec![
                TokenKind::Uuid("123e4567-e89b-12d3-a456-426614174000".into()),
                TokenKind::Uuid("deadbeef-0000-0000-0000-000000000000".into()),
                TokenKind::Hex("CAFE".into()),
                TokenKind::Hex(String::new()),
                TokenKind::Boolean(true),
                TokenKind::Boolean(false),
                TokenKind::Eof
            ]
        );
    }

    #[test]
    fn comments_and_positions() {
        let tokens = tokenize("-- one\nSELECT /* two\n */ x // three\n;").unwrap();
        let summary: Vec<(TokenKind, u32, u32)> = tokens.into_iter().map(|t| (t.kind, t.line, t.col)).collect();
        assert_eq!(
            summary,
            vec![
                (word("select"), 2, 0),
                (word("x"), 3, 4),
                (TokenKind::Symbol(Symbol::Semicolon), 4, 0),
                (TokenKind::Eof, 4, 1)
            ]
        );
        assert_eq!(tokenize("/* open").unwrap_err().to_string(), "line 1:7 mismatched character '<EOF>' expecting '*'");
    }

    #[test]
    fn operators() {
        assert_eq!(
            kinds("a+=1 b-=2 c!=d <= >= -"),
            vec![
                word("a"),
                TokenKind::Symbol(Symbol::PlusEq),
                TokenKind::Integer("1".into()),
                word("b"),
                TokenKind::Symbol(Symbol::MinusEq),
                TokenKind::Integer("2".into()),
                word("c"),
                TokenKind::Symbol(Symbol::Neq),
                word("d"),
                TokenKind::Symbol(Symbol::Lte),
                TokenKind::Symbol(Symbol::Gte),
                TokenKind::Symbol(Symbol::Minus),
                TokenKind::Eof
            ]
        );
        assert_eq!(tokenize("a @ b").unwrap_err().to_string(), "line 1:2 no viable alternative at character '@'");
    }
}
