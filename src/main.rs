//! The `cairn` binary: glue over [`cairn::cli`].

#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    cairn::cli::main()
}
