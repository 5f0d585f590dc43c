//! `captchaai-serve`: see [`captchaai_serve::cli`].

fn main() -> std::process::ExitCode {
    captchaai_serve::cli::main()
}
