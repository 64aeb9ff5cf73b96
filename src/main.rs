//! The `cairn` binary: glue over [`cairn::cli`].

#![deny(unsafe_code)]

fn main() -> std::process::ExitCode {
    // ONNX Runtime (1.31) records usage events in `~/.cache/Microsoft/DeveloperTools/
    // .onnxruntime/` and uploads them to Microsoft unless this variable is set when it
    // starts (`with_telemetry(false)` on its environment does not stop it). Cairn sends
    // nothing anywhere (docs/security.md, "Nothing leaves the machine").
    #[allow(unsafe_code)]
    // SAFETY: the first statement of `main`, before any thread exists that could read or
    // write the environment at the same time.
    unsafe {
        std::env::set_var("ORT_DISABLE_TELEMETRY", "1");
    }
    cairn::cli::main()
}
