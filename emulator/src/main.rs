//! `captchaai-emulator`: the CaptchaAI emulator on 127.0.0.1 until SIGINT/SIGTERM. Prints
//! `emulator listening on http://127.0.0.1:PORT` once it accepts connections.

use clap::Parser;

/// The CaptchaAI emulator (loopback in.php/res.php/solve.php) for tests in any language.
#[derive(Parser)]
#[command(name = "captchaai-emulator", version, about)]
struct Cli {
    #[command(flatten)]
    args: captchaai_emulator::cli::EmulatorArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    captchaai_emulator::cli::run(Cli::parse().args).await
}
