//! Writes of a large spill that end where the page cache can use large folios.
//!
//! A file system with large folios (ext4 from Linux 6.16 on, XFS, and others) caches a write in
//! folios no larger than the alignment of their place in the file allows. A writer thread's
//! batches are the normaliser's output of one read each, a few bytes short of the read size, so
//! each write starts where the last one ended, at no boundary in particular, and the folios at
//! both of its ends are cut down to a page or a few: each costs an allocation, a charge to the
//! memory cgroup, an LRU insertion and (on ext4) buffer heads. A test program writing 256 MiB
//! on this project's machine (kernel 6.18, ext4), batches of 240-260 KiB, blocks allocated
//! ahead: 63.5 ms (median of 7) for the batches as they come, 51.9 ms when each write ends on a
//! 128 KiB boundary of the file and the rest of its batch is written with the next one, copy
//! of that rest included.
//!
//! So the writer thread writes each batch up to the last [`ALIGN`] boundary in it, and holds
//! the rest back ([`Held`]), without copying: the batch's own buffer is kept until the next
//! write, which takes the rest and the next batch together (`writev`). Nothing is held while
//! the writer waits: a batch is held back only while the next one is already queued, so the
//! file still trails the command by moments.

use std::fs::File;
use std::io::{self, IoSlice, Write};

/// The boundary a large spill's writes end on, where they can.
pub(super) const ALIGN: u64 = 128 << 10;

/// The end of the last batch written, past the last [`ALIGN`] boundary in it: not yet in the
/// file, and written before anything after it.
#[derive(Debug, Default)]
pub(super) struct Held {
    /// The batch's buffer, kept whole so that the rest need not be copied.
    text: String,
    /// Where the rest starts in `text` (a char boundary).
    from: usize,
}

impl Held {
    /// Holds `text` from byte `from` on (a char boundary).
    pub(super) fn new(text: String, from: usize) -> Held {
        debug_assert!(text.is_char_boundary(from));
        Held { text, from }
    }

    /// The bytes held back.
    pub(super) fn rest(&self) -> &str {
        &self.text[self.from..]
    }

    /// The buffer, for reuse once its rest is written.
    pub(super) fn into_buffer(self) -> String {
        self.text
    }
}

/// How much of `text` a write should take so that it ends on an [`ALIGN`] boundary: `text`
/// follows `before` bytes held back, which follow the file's first `in_file` bytes. `None` when
/// no boundary falls within `text`, or only one so near its start that the cut, moved back to
/// a char boundary, would take none of it: then all of it is written.
pub(super) fn aligned_cut(in_file: u64, before: usize, text: &str) -> Option<usize> {
    let start = in_file + before as u64;
    let end = (start + text.len() as u64) / ALIGN * ALIGN;
    let mut cut = usize::try_from(end.checked_sub(start)?).ok()?;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    (cut > 0).then_some(cut)
}

/// Writes all of `parts`, in order, in as few system calls as the kernel allows.
pub(super) fn write_all_parts(file: &mut File, parts: [&str; 2]) -> io::Result<()> {
    let mut slices = [
        IoSlice::new(parts[0].as_bytes()),
        IoSlice::new(parts[1].as_bytes()),
    ];
    let mut left = &mut slices[..];
    // Drops empty parts at the start (and, after each write, the parts written and the empty
    // ones after them): a write of nothing but empty slices would return 0.
    IoSlice::advance_slices(&mut left, 0);
    while !left.is_empty() {
        match file.write_vectored(left) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut left, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The first `room` bytes of `parts` (each cut back to a char boundary, so what is written
/// reads back whole; nothing of the second once the first is cut).
pub(super) fn first_bytes(parts: [&str; 2], room: usize) -> [&str; 2] {
    let mut left = room;
    let mut kept = [""; 2];
    for (part, kept) in parts.into_iter().zip(&mut kept) {
        let mut keep = left.min(part.len());
        while !part.is_char_boundary(keep) {
            keep -= 1;
        }
        *kept = &part[..keep];
        if keep < part.len() {
            break;
        }
        left -= keep;
    }
    kept
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_write_ends_on_the_last_boundary_within_its_text() {
        let text = "x".repeat(300 << 10);
        // From the file's start: up to 256 KiB, the last boundary within 300 KiB.
        assert_eq!(aligned_cut(0, 0, &text), Some(256 << 10));
        // After 100 KiB in the file and 20 KiB held: 120 KiB in, so the text's first 264 KiB
        // reach 384 KiB.
        assert_eq!(aligned_cut(100 << 10, 20 << 10, &text), Some(264 << 10));
        // No boundary within a short text.
        assert_eq!(aligned_cut(1, 0, "short"), None);
        // A boundary at the text's very end takes all of it.
        assert_eq!(aligned_cut(ALIGN - 5, 0, "12345"), Some(5));
    }

    #[test]
    fn a_cut_inside_a_char_moves_back_to_its_start() {
        // 'é' is two bytes: the boundary falls between them.
        let text = format!("{}é{}", "x".repeat(ALIGN as usize - 1), "y".repeat(10));
        assert_eq!(aligned_cut(0, 0, &text), Some(ALIGN as usize - 1));
        // A boundary one byte in, inside a first char: nothing can be taken before it.
        assert_eq!(aligned_cut(ALIGN - 1, 0, "éé"), None);
    }

    proptest! {
        /// A cut is a char boundary inside the text, at the file's last boundary within it
        /// or less than a char before it; there is none only when no boundary can be reached.
        #[test]
        fn a_cut_is_the_last_boundary_a_char_allows(
            in_file in 0u64..(4 * ALIGN),
            before in 0usize..(ALIGN as usize),
            text in "[a-zé€😀]{0,40}",
            pad in 0usize..(2 * ALIGN as usize),
        ) {
            let text = format!("{}{text}", "p".repeat(pad));
            let start = in_file + before as u64;
            let end = start + text.len() as u64;
            let last = end / ALIGN * ALIGN;
            match aligned_cut(in_file, before, &text) {
                Some(cut) => {
                    prop_assert!(cut > 0 && cut <= text.len() && text.is_char_boundary(cut));
                    let at = start + cut as u64;
                    prop_assert!(at <= last && last - at < 4, "cut at {at}, boundary {last}");
                }
                None => prop_assert!(last <= start + 3, "no cut, boundary {last} after {start}"),
            }
        }

        /// What fits is written whole chars at a time, the first part before the second, and
        /// never more than there is room for.
        #[test]
        fn the_first_bytes_are_whole_chars_in_order(
            a in "[a-zé€]{0,12}",
            b in "[a-zé€]{0,12}",
            room in 0usize..40,
        ) {
            let [x, y] = first_bytes([&a, &b], room);
            prop_assert!(a.starts_with(x) && b.starts_with(y));
            prop_assert!(x.len() + y.len() <= room);
            prop_assert!(y.is_empty() || x == a);
            // Nothing left out that would have fit: the next char of the first part that is
            // cut, or of the second, is too long for the room left.
            let whole = format!("{a}{b}");
            let kept = x.len() + y.len();
            if let Some(next) = whole[kept..].chars().next() {
                prop_assert!(kept + next.len_utf8() > room);
            }
        }
    }
}
