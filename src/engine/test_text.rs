//! Text for tests: words for generated lines, and a text cut into the pieces a stream brings.

/// A word of letters only for `i`, a different one for each number: lines that differ by it are
/// neither repeats nor "similar" (equal but for their numbers), and its length grows slowly.
pub(crate) fn letters(mut i: usize) -> String {
    let mut word = String::new();
    loop {
        word.push(char::from(b'a' + (i % 26) as u8));
        i /= 26;
        if i == 0 {
            return word;
        }
    }
}

/// Where the pieces of `text` start and end, each as long as the next of `sizes` says (in
/// turn, over again; at least 1) and then to the next char boundary: as reads split a
/// stream's chars and lines anywhere.
pub(crate) fn pieces<'a>(
    text: &'a str,
    sizes: &'a [usize],
) -> impl Iterator<Item = (usize, usize)> + 'a {
    let mut at = 0;
    sizes.iter().cycle().map_while(move |&size| {
        if at == text.len() {
            return None;
        }
        let start = at;
        at = (at + size.clamp(1, text.len() - at)..=text.len())
            .find(|&e| text.is_char_boundary(e))
            .expect("the text's end is a boundary");
        Some((start, at))
    })
}
