//! Drives one solve by hand (examples/engine.rs: `cargo run --example engine`).
//! The replies are canned; a real host POSTs each request and feeds back what it gets.
use captchaai_engine::{Config, Output, Solve};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let task = r#"{"type":"turnstile","sitekey":"0x4AAAAAAABkMYinukE8nzY","pageurl":"https://example.com/login"}"#;
    let key = "0123456789abcdef0123456789abcdef";
    let mut solve = Solve::from_json(task, key, &Config::default(), 0)?; // validates; sends nothing
    let mut replies =
        [r#"{"status":1,"request":"7412"}"#, "CAPCHA_NOT_READY", r#"{"status":1,"request":"0.TOKEN"}"#].into_iter();
    let mut output = solve.poll_output(0)?;
    let solution = loop {
        output = match output {
            Output::Send(request) => {
                // A real host sleeps until request.at, POSTs request.body to request.url and
                // reports a transport error after request.timeout_ms without a reply.
                println!("{:?} due at {} ms: POST {}", request.kind, request.at, request.url);
                let reply = replies.next().ok_or("no canned reply left")?;
                solve.handle_response(request.at + 300, request.id, 200, reply.as_bytes())?
            }
            Output::Solved(solution) => break solution,            // sticky
            Output::Failed(failure) => return Err(failure.into()), // sticky; failure.class says what to do
        };
    };
    println!("solved: {} after {} polls", solution.answer.as_str(), solution.polls);
    Ok(())
}
