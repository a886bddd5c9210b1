use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

#[derive(Debug, Args)]
pub struct CrdsArgs {
    /// Write one file per CRD into this directory (e.g. charts/tessera/crds) instead of
    /// printing them.
    #[arg(long)]
    dir: Option<PathBuf>,
}

pub fn run(args: CrdsArgs) -> anyhow::Result<ExitCode> {
    match args.dir {
        Some(dir) => {
            let written = tessera::crd::write_all(&dir)
                .with_context(|| format!("cannot write CRDs to {}", dir.display()))?;
            for path in written {
                eprintln!("wrote {}", path.display());
            }
        }
        None => {
            for (_, crd) in tessera::crd::all() {
                print!("---\n{}", tessera::crd::to_yaml(&crd));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
