//! The normal form used to spot duplicate learning patterns. Which characters a
//! learning may hold is the crate's one text policy ([`crate::text`], its strict form).

/// The duplicate-detection form of a pattern: lower-cased, every run of characters that
/// are not letters or digits folded to one space, trimmed. `"Use  WAL-mode!"` and
/// `"use wal mode"` are the same pattern.
pub(crate) fn normalize_pattern(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut gap = false;
    for c in pattern.chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() {
            if gap && !out.is_empty() {
                out.push(' ');
            }
            gap = false;
            out.push(c);
        } else {
            gap = true;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_form_ignores_case_space_and_punctuation() {
        assert_eq!(normalize_pattern("  Use  WAL-mode!! "), "use wal mode");
        assert_eq!(
            normalize_pattern("Nuxt auto-imports app/utils/"),
            normalize_pattern("nuxt AUTO imports: app utils")
        );
        assert_eq!(normalize_pattern("Ça marche — déjà"), "ça marche déjà");
    }
}
