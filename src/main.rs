//! The `cairn` binary: glue over [`cairn::cli`].

fn main() -> std::process::ExitCode {
    cairn::cli::main()
}
