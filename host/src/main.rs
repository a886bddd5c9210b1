//! `tessera`: the Tessera host binary.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    if !matches!(args.command, cli::Command::Run(_)) {
        exit_quietly_on_closed_pipe();
    }
    cli::init_tracing(&args.global);
    match cli::run(args) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {}", tessera::report::chain(err.as_ref()));
            ExitCode::from(1)
        }
    }
}

/// Rust ignores SIGPIPE, so `print!` to a closed pipe (`tessera crds | head -1`) panics.
/// One-shot commands get the default action back and end quietly, like any Unix filter.
/// `tessera run` keeps ignoring it: it prints nothing on stdout, and a long-running
/// process must not die from a peer that went away.
fn exit_quietly_on_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: called before any other thread exists; SIG_DFL is a valid disposition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
