//! `tests/reference_embed.py` (independent ONNX Runtime in Python, the same model files)
//! run from a benchmark: the raw-model baseline of `vault` and `load`.

use std::path::PathBuf;

/// Run `tests/reference_embed.py` (independent ONNX Runtime in Python) on `texts` with
/// extra arguments before the input file; returns its stdout.
pub fn run(texts: &[String], args: &[String]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("texts.jsonl");
    let lines: Vec<String> = texts
        .iter()
        .map(|t| serde_json::to_string(t).unwrap())
        .collect();
    std::fs::write(&input, lines.join("\n")).unwrap();
    let out = std::process::Command::new("python3")
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reference_embed.py"))
        .args(args)
        .arg(&input)
        .output()
        .expect("python3 runs (scripts/setup.sh installs onnxruntime, tokenizers, numpy)");
    assert!(
        out.status.success(),
        "reference_embed.py failed (run scripts/setup.sh): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
