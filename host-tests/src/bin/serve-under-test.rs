//! The `captchaai-serve` command line, built here so that the tests can start it as a child
//! process (`CARGO_BIN_EXE_serve-under-test`): the same code as the `captchaai-serve` binary.

fn main() -> std::process::ExitCode {
    captchaai_serve::cli::main()
}
