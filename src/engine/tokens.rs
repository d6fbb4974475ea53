//! Counting model tokens with a real BPE tokenizer (OpenAI's o200k vocabulary, which
//! `tiktoken-rs` carries inside the crate, so nothing is fetched at run time), for previews
//! budgeted in tokens rather than bytes: bytes/4 is wrong by 2x on code and logs.

use std::sync::OnceLock;

use tiktoken_rs::CoreBPE;

/// The tokenizer, built once per process on first use (about 150 ms).
fn tokenizer() -> Option<&'static CoreBPE> {
    static BPE: OnceLock<Option<CoreBPE>> = OnceLock::new();
    BPE.get_or_init(|| tiktoken_rs::o200k_base().ok()).as_ref()
}

/// Tokens in `text` under o200k; if the tokenizer cannot be built, a conservative estimate
/// (one token per 2 bytes) so a budget is still never exceeded.
pub fn count(text: &str) -> usize {
    match tokenizer() {
        Some(bpe) => bpe.encode_ordinary(text).len(),
        None => text.len().div_ceil(2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_real_tokens_not_bytes() {
        assert_eq!(count(""), 0);
        assert_eq!(count("hello world"), 2);
        let code = "error[E0308]: mismatched types\n  --> src/lib.rs:34:18\n";
        let n = count(code);
        assert!(n > 5 && n < code.len() / 2, "{n}");
    }
}
