//! The `captchaai` command line. Each subcommand lives in its own module with an `Args` struct
//! (clap derive) and an async `run`; add new ones to [`Command`] and [`run`].

use clap::{Parser, Subcommand};

pub mod solve;

/// `captchaai`: solve with the engine component, check threads, run the emulator.
#[derive(Parser)]
#[command(name = "captchaai", version, about = "CaptchaAI solve engine: solve, threads, emulator")]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// Run the CaptchaAI emulator standalone on 127.0.0.1 until killed.
    Emulator(captchaai_emulator::cli::EmulatorArgs),
    /// Solve one task (flags or JSON) or a batch file with the engine component; key from
    /// CAPTCHAAI_KEY.
    Solve(solve::SolveArgs),
    /// Show the plan's threads and how many are busy; key from CAPTCHAAI_KEY.
    Threads(solve::ThreadsArgs),
}

/// Runs a parsed command line. Errors never contain API keys.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Emulator(args) => captchaai_emulator::cli::run(args).await,
        Command::Solve(args) => solve::solve(args).await,
        Command::Threads(args) => solve::threads(args).await,
    }
}
