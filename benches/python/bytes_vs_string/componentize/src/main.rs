//! `componentize IN.wasm OUT.wasm`: wraps a wasm32-unknown-unknown core module (with the
//! component-type section wit-bindgen put in it) into a component, like `wasm-tools component new`.

use anyhow::{Context, Result, bail};
use wit_component::ComponentEncoder;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, output] = args.as_slice() else { bail!("usage: componentize IN.wasm OUT.wasm") };
    let core = std::fs::read(input).with_context(|| format!("reading {input}"))?;
    let component = ComponentEncoder::default().module(&core)?.validate(true).encode()?;
    std::fs::write(output, &component).with_context(|| format!("writing {output}"))?;
    println!("{output}: {} bytes", component.len());
    Ok(())
}
