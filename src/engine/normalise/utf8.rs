//! UTF-8 repair, the first stage: invalid bytes become U+FFFD as [`String::from_utf8_lossy`]
//! makes them, and a char cut at a chunk's end waits for the next chunk.

/// Streaming UTF-8 repair with the policy of [`String::from_utf8_lossy`]: one U+FFFD per
/// maximal invalid subpart. Holds back an incomplete char at the end of a chunk.
#[derive(Default)]
pub(super) struct Utf8Repair {
    held: [u8; 4],
    len: usize,
}

impl Utf8Repair {
    /// Repairs `input`, passing valid text (complete chars only) to `sink`.
    pub(super) fn feed(&mut self, input: &[u8], mut sink: impl FnMut(&str)) {
        let mut rest = self.complete_held(input, &mut sink);
        loop {
            // SIMD validation: every byte of output passes here, and std's check costs twice.
            let error = match simdutf8::compat::from_utf8(rest) {
                Ok(text) => {
                    if !text.is_empty() {
                        sink(text);
                    }
                    return;
                }
                Err(error) => error,
            };
            let (head, tail) = rest.split_at(error.valid_up_to());
            // `head` was just found valid: checking it again is cheap next to `Utf8Chunks`
            // (byte at a time) and needs no `unsafe`.
            let head = simdutf8::basic::from_utf8(head).unwrap_or_default();
            if !head.is_empty() {
                sink(head);
            }
            match error.error_len() {
                Some(len) => {
                    sink("\u{FFFD}");
                    rest = &tail[len..];
                }
                None => {
                    self.held[..tail.len()].copy_from_slice(tail);
                    self.len = tail.len();
                    return;
                }
            }
        }
    }

    /// Completes (or rejects) the held char from the start of `input`; returns the rest.
    fn complete_held<'a>(&mut self, input: &'a [u8], sink: &mut impl FnMut(&str)) -> &'a [u8] {
        if self.len == 0 {
            return input;
        }
        let want = utf8_width(self.held[0]);
        let take = want.saturating_sub(self.len).min(input.len());
        let mut buf = self.held;
        buf[self.len..self.len + take].copy_from_slice(&input[..take]);
        match std::str::from_utf8(&buf[..self.len + take]) {
            Ok(c) => {
                sink(c);
                self.len = 0;
                &input[take..]
            }
            Err(e) => match e.error_len() {
                None => {
                    self.held = buf;
                    self.len += take;
                    &input[take..]
                }
                Some(bad) => {
                    sink("\u{FFFD}");
                    let used = bad.saturating_sub(self.len);
                    self.len = 0;
                    &input[used..]
                }
            },
        }
    }

    /// Drops a held incomplete char; true when there was one (it stands for one U+FFFD).
    pub(super) fn take_incomplete(&mut self) -> bool {
        std::mem::take(&mut self.len) > 0
    }
}

/// Length of the UTF-8 sequence a lead byte starts.
pub(super) fn utf8_width(lead: u8) -> usize {
    match lead {
        0x00..=0x7F => 1,
        0x80..=0xDF => 2,
        0xE0..=0xEF => 3,
        _ => 4,
    }
}
