//! Solves one Turnstile task (captchaai/examples/solve.rs: `cargo run --release -p captchaai --example solve`).
//! The key comes from CAPTCHAAI_KEY; CAPTCHAAI_BASE_URL unset means https://ocr.captchaai.com.
use anyhow::Context;
use captchaai::{Answer, Clock, Config, EngineHost, Runner, RunnerOptions};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let key = std::env::var("CAPTCHAAI_KEY").context("set CAPTCHAAI_KEY to your CaptchaAI API key")?;
    let config = Config { base_url: std::env::var("CAPTCHAAI_BASE_URL").ok(), ..Config::default() };
    let runner = Runner::new(EngineHost::embedded(None)?, RunnerOptions::new(Clock::real(), 64))?;
    let task = r#"{"type":"turnstile","sitekey":"0x4AAAAAAABkMYinukE8nzY","pageurl":"https://example.com/login"}"#;
    match runner.solve(task, &key, &config).await?.outcome {
        Ok(solution) => match solution.answer {
            Answer::Text(answer) | Answer::Json(answer) => println!("{answer}"),
        },
        Err(failure) => anyhow::bail!("{} ({:?}): {}", failure.code, failure.class, failure.message),
    }
    Ok(())
}
