//! The `gaspard` command.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use gaspard_analyze::{dump, profile, trace};

/// gaspard records what each thread of a parallel program does (through the
/// GASP interface and the runtimes' own tool interfaces) and tells you why
/// the program is slow.
#[derive(Parser, Debug)]
#[command(name = "gaspard", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a program with recording into a trace directory.
    ///
    /// Sets GASPARD_DIR for the program and every process it starts. A
    /// program built against gaspard's GASP library (libgaspard) records
    /// into it. The program's exit status is passed on.
    Run {
        /// Trace directory (default: ./gaspard-<program>-<UTC date>).
        #[arg(short = 'o', long = "output")]
        output: Option<PathBuf>,
        /// The program and its arguments.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        cmd: Vec<String>,
    },
    /// Print every event of a trace, per thread in time order, decoded.
    Dump {
        /// Trace directory.
        dir: PathBuf,
        /// JSON instead of text (each event names its kind by the spec's symbolic name).
        #[arg(long)]
        json: bool,
    },
    /// Count and time events per event name, per callsite and per thread.
    Report {
        /// Trace directory.
        dir: PathBuf,
        /// JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn utc_stamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    gaspard_format::manifest::utc_stamp(secs)
}

fn run(output: Option<PathBuf>, cmd: Vec<String>) -> Result<ExitCode> {
    let prog = std::path::Path::new(&cmd[0])
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "program".into());
    let dir = output.unwrap_or_else(|| PathBuf::from(format!("gaspard-{prog}-{}", utc_stamp())));
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create trace directory {}", dir.display()))?;
    let dir = dir.canonicalize().unwrap_or(dir);
    let status = std::process::Command::new(&cmd[0])
        .args(&cmd[1..])
        .env("GASPARD_DIR", &dir)
        .status()
        .with_context(|| format!("cannot run {}", cmd[0]))?;
    eprintln!("gaspard: trace in {}", dir.display());
    if let Some(code) = status.code() {
        return Ok(ExitCode::from(code.clamp(0, 255) as u8));
    }
    use std::os::unix::process::ExitStatusExt;
    let sig = status.signal().unwrap_or(0);
    eprintln!("gaspard: {} was killed by signal {sig}", cmd[0]);
    Ok(ExitCode::from((128 + sig).clamp(0, 255) as u8))
}

fn read(dir: &std::path::Path) -> Result<trace::Trace> {
    if !dir.exists() {
        bail!("{} does not exist", dir.display());
    }
    Ok(trace::read(dir)?)
}

fn main() -> ExitCode {
    // Printing into a closed pipe (`gaspard dump | head`) should end quietly.
    // SAFETY: restoring the default disposition of SIGPIPE has no preconditions.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = Cli::parse();
    let r = (|| -> Result<ExitCode> {
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        match cli.command {
            Command::Run { output, cmd } => return run(output, cmd),
            Command::Dump { dir, json } => {
                let t = read(&dir)?;
                if json {
                    serde_json::to_writer(&mut out, &dump::to_json(&t))?;
                    writeln!(out)?;
                } else {
                    dump::to_text(&t, &mut out)?;
                }
            }
            Command::Report { dir, json } => {
                let t = read(&dir)?;
                let r = profile::report(&t);
                if json {
                    serde_json::to_writer_pretty(&mut out, &r)?;
                    writeln!(out)?;
                } else {
                    profile::to_text(&r, &mut out)?;
                }
            }
        }
        out.flush()?;
        Ok(ExitCode::SUCCESS)
    })();
    match r {
        Ok(c) => c,
        Err(e) => {
            eprintln!("gaspard: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
