//! The `regflash` command line.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = regflash::cli::Cli::parse();
    match regflash::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
