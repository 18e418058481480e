//! The `gaspard` command.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use gaspard_analyze::distributed::Transport;
use gaspard_analyze::{dump, profile, trace};

// Reading a big trace allocates and frees large blocks: mimalloc keeps
// them mapped instead of returning them to the system each time, which
// halves the time spent in page faults.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod cc;
mod compare;
mod deps;
mod mpi;

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
        /// Leave out these events (GASPARD_EXCLUDE): comma-separated kind names
        /// (GASP_C_MALLOC) or user event names; a trailing * matches a prefix
        /// (GASP_SHMEM_LONG_*). They are counted, and the count is in the trace.
        #[arg(long, value_name = "NAMES")]
        exclude: Option<String>,
        /// Record only these events (GASPARD_INCLUDE), named as for --exclude.
        #[arg(long, value_name = "NAMES")]
        include: Option<String>,
        /// Leave out the events made at these source positions
        /// (GASPARD_EXCLUDE_SITES): comma-separated FILE or FILE:LINE, FILE
        /// matching the end of a path (heat.c matches /src/heat.c).
        #[arg(long, value_name = "SITES")]
        exclude_sites: Option<String>,
        /// Profile-only mode (GASPARD_PROFILE_ONLY=1): keep counts, times and
        /// bytes per event name, callsite and thread, not the events. The
        /// trace directory then holds a small .profile file per process;
        /// `gaspard report` shows its profiles (no timeline, so no findings).
        #[arg(long)]
        profile_only: bool,
        /// The program and its arguments.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        cmd: Vec<String>,
    },
    /// Compile with gaspard's instrumentation (GASP Section 3.1).
    ///
    /// `--profile` or `--profile-local`: user events of pupc.h on, function
    /// entry/exit (GASP_C_FUNC) and malloc/realloc/free (GASP_C_MALLOC, ...)
    /// recorded. `--profile-only FILE`: only the events FILE names, one per
    /// line. Without these, user events compile away. Also installed as
    /// gaspard-cc, gaspard-mpicc, gaspard-oshcc and gaspard-caf.
    #[command(disable_help_flag = true)]
    Cc {
        /// --profile | --profile-local | --profile-only FILE, then the compiler and its arguments.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Print every event of a trace, per thread in time order, decoded.
    ///
    /// Times are in microseconds since the trace began, on the clock of
    /// rank or PE 0: a process that measured its clock against it (MPI and
    /// OpenSHMEM programs do, in their initialization and finalization)
    /// has its times corrected for the offset and drift measured, shown in a
    /// `clock:` line per process (JSON: `clock_sync`). Set
    /// GASPARD_NO_CLOCK_SYNC=1 to see the times as recorded.
    ///
    /// A damaged trace is read as far as it goes; what is missing or wrong
    /// (cut or corrupt stream files, manifests that disagree with their
    /// streams) is listed as problems.
    Dump {
        /// Trace directory.
        dir: PathBuf,
        /// JSON instead of text (each event names its kind by the spec's symbolic name).
        #[arg(long)]
        json: bool,
        /// Read the trace one process at a time: only a process's events in
        /// memory (chosen by itself when the trace looks too big for the
        /// memory available). The threads come out the same; the text's
        /// count of events and threads, and the problems found in the events
        /// (events stamped too late, records that stop), come after them (in
        /// JSON, those problems after the others).
        #[arg(long)]
        low_memory: bool,
    },
    /// What slows the program: findings, time per thread, balance, waits,
    /// communication, shared blocks, profiles.
    ///
    /// Findings (most severe first, with their source lines and advice), each
    /// thread's time in computation, synchronization and communication, load
    /// balance at barriers, wait states, locks, who talks to whom, shared
    /// objects in blocks (false sharing, producer-consumer), and count, time
    /// and bytes per event name, callsite and thread.
    ///
    /// Also: findings, time per thread, load balance, communication
    /// matrices, shared objects in blocks, waits and locks. Times are
    /// corrected for the clock offsets and drifts measured between
    /// processes, as the `clock:` lines say (GASPARD_NO_CLOCK_SYNC=1: not).
    ///
    /// A damaged trace is reported as far as it goes; its notes say what is
    /// missing or wrong.
    Report {
        /// Trace directory.
        dir: PathBuf,
        /// JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Also write the browser view as one self-contained HTML file
        /// (timeline, time per thread, communication matrix, blocks of shared
        /// objects, findings, profiles; no network needed to open it).
        /// Not with --mpi.
        #[arg(long, value_name = "FILE", conflicts_with = "mpi")]
        html: Option<PathBuf>,
        /// Bytes per block of shared objects, for the false-sharing and
        /// producer-consumer analyses (default: a page).
        #[arg(long, default_value_t = gaspard_analyze::blocks::DEFAULT_BLOCK_SIZE,
              value_parser = clap::value_parser!(u64).range(1..))]
        block_size: u64,
        /// Share the reading and the analysis among the ranks of an MPI
        /// job: `mpirun -np N gaspard report DIR --mpi`. Each rank reads,
        /// checks and decodes the stream files of its share of the recorded
        /// processes and summarizes each stream (its profile and its part of
        /// every analysis); rank 0 merges the summaries and prints the
        /// report, the same as without --mpi.
        #[arg(long)]
        mpi: bool,
        /// Read the trace one process at a time, keeping in memory only the
        /// events of the processes being read and a summary of each stream
        /// (renumbered and shifted to the trace's callsites and start once
        /// every process is read). Most processes are summarized as they are
        /// read, each stream in windows of 8,192 events; one whose streams
        /// need more of it beforehand (clock measurements, MPI or OpenSHMEM
        /// start-ups, shared objects, coarrays) is read whole, or, when its
        /// stream files hold 64 MiB or more, in windows of 8,192 events per
        /// stream (after a light first reading), so that not even it is
        /// held whole. This
        /// is how the report is made without --html: its memory grows with
        /// the barriers the threads meet, not with the events. With --html, the trace is read whole for its timeline,
        /// unless it looks too big for the memory available or this is
        /// given: then the file's timeline is a quick scan's (without the
        /// coarray operations recognised in MPI calls or the source lines
        /// of code addresses), and says so. With --mpi, each rank reads its
        /// share so. The report is the same either way.
        #[arg(long)]
        low_memory: bool,
        /// Read the whole trace into memory before analysing it, as with
        /// --html (unless it looks too big for the memory available). The
        /// report is the same as one process at a time; the memory needed
        /// grows with the trace (about 70 bytes per event).
        #[arg(long, conflicts_with_all = ["low_memory", "mpi"])]
        in_memory: bool,
    },
    /// Serve the browser view of a trace on 127.0.0.1 and print its URL.
    ///
    /// The view: a timeline per thread (mouse wheel zooms, dragging pans,
    /// a click shows the event and its source line; communication drawn as
    /// arrows), time per thread, the communication matrix, the blocks of each
    /// shared object per epoch, the findings (each one shows its place in the
    /// timeline) and sortable profiles. The URL comes as soon as a quick
    /// scan of the trace has built the timeline; the whole trace is then
    /// read in the background, and the other views (and the details of each
    /// event) follow when its report is computed. Runs until interrupted
    /// (Ctrl-C).
    ///
    /// The first opening writes a view index, DIR/view.gvi (or, when DIR
    /// cannot be written, a file in $XDG_CACHE_HOME/gaspard/, else
    /// ~/.cache/gaspard/, named by a hash of DIR's path): the timeline's
    /// summary columns (about 130 kB per thread) and the report. Later openings
    /// show both from it at once, while the trace is read again in the
    /// background. Any change to the trace's files, or to the binaries they
    /// name, makes it out of date (it is then rebuilt); delete the file to
    /// remove it.
    View {
        /// Trace directory.
        dir: PathBuf,
        /// Port on 127.0.0.1 (default: a free one).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Bytes per block of shared objects (default: a page).
        #[arg(long, default_value_t = gaspard_analyze::blocks::DEFAULT_BLOCK_SIZE,
              value_parser = clap::value_parser!(u64).range(1..))]
        block_size: u64,
    },
    /// Who read and who wrote each block of each shared object, epoch by
    /// epoch (epochs are the intervals between barriers).
    ///
    /// One line per block and epoch that saw accesses: object, home (rank,
    /// PE or image from 0), block, epoch, readers, writers (thread numbers as
    /// in the header). The data behind SVMview's page-state view.
    Blocks {
        /// Trace directory.
        dir: PathBuf,
        /// JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Bytes per block (default: a page).
        #[arg(long, default_value_t = gaspard_analyze::blocks::DEFAULT_BLOCK_SIZE,
              value_parser = clap::value_parser!(u64).range(1..))]
        block_size: u64,
        /// Read the trace one process at a time: the same output, with one
        /// process's events and every stream's accesses in memory rather
        /// than every event. Chosen by itself for a trace of several
        /// processes and 8 M events or more (it is then faster too), and for
        /// a trace too big for the memory available (or GASPARD_MEMORY bytes).
        #[arg(long)]
        low_memory: bool,
        /// Read the whole trace into memory, whatever its size (unless it
        /// looks too big for the memory available): the same output.
        #[arg(long, conflicts_with = "low_memory")]
        in_memory: bool,
    },
    /// Compare runs of one program (e.g. at 2, 4, 8 processes): scaling of the
    /// program, of each region and of each finding.
    #[command(long_about = compare::HELP)]
    Compare {
        /// Trace directories, two or more.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Regions of each kind (event, callsite) shown in the text output.
        #[arg(long, default_value_t = 15)]
        top: usize,
        /// Keep the runs in the order given (the first is the baseline)
        /// instead of sorting them by process count, then thread count.
        #[arg(long)]
        keep_order: bool,
    },
    /// Write a trace in a format other tools read: OTF2 (Vampir, Scalasca),
    /// Perfetto (ui.perfetto.dev) or Parquet (DuckDB, pandas).
    ///
    /// otf2: OUT is an OTF2 archive directory (open OUT/traces.otf2): a
    /// location per thread, a location group per process, a region per event
    /// name and callsite, a communicator per model, an RMA window per shared
    /// object. Enter/Leave for every START/END; MpiSend/MpiRecv for blocking
    /// MPI messages, MpiIsend/MpiIrecv and their completions for non-blocking
    /// ones; MpiCollectiveBegin/End for collectives and barriers (MPI and
    /// OpenSHMEM); RmaPut/RmaGet/RmaAtomic and RmaOpCompleteBlocking for
    /// one-sided operations; window creation, fences and locks of MPI
    /// windows.
    ///
    /// perfetto: OUT is one protobuf file: a track per process and thread, a
    /// slice per START/END pair, flows from each send to its receive and from
    /// each one-sided access to an instant on its target's track.
    ///
    /// parquet: OUT is a directory holding events.parquet (one row per event)
    /// and communication.parquet (one row per MPI or OpenSHMEM operation with
    /// a peer).
    ///
    /// An existing OUT is replaced only with --force.
    Export {
        /// Trace directory.
        dir: PathBuf,
        /// Output format.
        #[arg(long, value_enum)]
        format: ExportFormat,
        /// Output: a directory for otf2 and parquet, a file for perfetto
        /// (missing directories on the way are made).
        #[arg(short, long)]
        output: PathBuf,
        /// Replace OUT if it exists.
        #[arg(long)]
        force: bool,
        /// Read the trace one process at a time, so that memory holds two
        /// processes' events at most rather than all: the same output, the
        /// stream files read two or three times. Chosen by itself for a
        /// trace of several processes and 8 M events or more (it is then
        /// faster too, reading the next process while one is written), and
        /// for a trace too big for the memory available (or GASPARD_MEMORY
        /// bytes).
        #[arg(long)]
        low_memory: bool,
        /// Read the whole trace into memory, whatever its size (unless it
        /// looks too big for the memory available): the same output.
        #[arg(long, conflicts_with = "low_memory")]
        in_memory: bool,
    },
}

/// Formats of `gaspard export`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum ExportFormat {
    /// OTF2 archive (Vampir, Scalasca).
    Otf2,
    /// Perfetto protobuf trace.
    Perfetto,
    /// Parquet tables.
    Parquet,
}

fn utc_stamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    gaspard_format::manifest::utc_stamp(secs)
}

/// Launchers (Open MPI's and OpenCoarrays') that take `-x VAR=VALUE` to set
/// the environment of the processes they start.
const LAUNCHERS: [&str; 5] = ["mpirun", "mpiexec", "oshrun", "orterun", "cafrun"];

/// The adapter libraries the programs named in `cmd` need: a program linked
/// with Open MPI's liboshmem gets libgaspard_shmem.so, an MPI program (Coarray
/// Fortran included) libgaspard_mpi.so. Each argument that
/// names an executable file (the program itself, or the one a launcher
/// starts) has its libraries read from its ELF dynamic sections; `ldd` is
/// asked only when that reading cannot tell.
fn adapters_for(cmd: &[String], lib: &std::path::Path) -> Vec<PathBuf> {
    let mut needed = std::collections::BTreeSet::new();
    for a in cmd {
        let p = std::path::Path::new(a);
        if !p.is_file() {
            continue;
        }
        let deps = match deps::libraries(p) {
            Some(libs) => libs.join("\n"),
            None => {
                let Ok(out) = std::process::Command::new("ldd").arg(p).output() else {
                    continue;
                };
                String::from_utf8_lossy(&out.stdout).into_owned()
            }
        };
        if deps.contains("liboshmem") {
            needed.insert("libgaspard_shmem.so");
        } else if deps.contains("libmpi.so") || deps.contains("libcaf_mpi") {
            needed.insert("libgaspard_mpi.so");
        }
    }
    let mut found = Vec::new();
    for name in needed {
        let path = lib.join(name);
        if path.exists() {
            found.push(path);
        } else {
            eprintln!(
                "gaspard: {} is missing: the program's {name} calls are not recorded",
                path.display()
            );
        }
    }
    found
}

fn run(
    output: Option<PathBuf>,
    filters: &[(&str, Option<String>)],
    cmd: Vec<String>,
) -> Result<ExitCode> {
    let prog = std::path::Path::new(&cmd[0])
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "program".into());
    let dir = output.unwrap_or_else(|| PathBuf::from(format!("gaspard-{prog}-{}", utc_stamp())));
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create trace directory {}", dir.display()))?;
    let dir = dir.canonicalize().unwrap_or(dir);
    let mut cmd = cmd;
    let mut env: Vec<(String, String)> = vec![("GASPARD_DIR".into(), dir.display().to_string())];
    for (k, v) in filters {
        if let Some(v) = v {
            env.push((k.to_string(), v.clone()));
        }
    }
    if let Ok(inst) = cc::find_install() {
        // OpenMP programs on LLVM's libomp load gaspard as their OMPT tool; other
        // programs ignore the variable.
        if std::env::var_os("OMP_TOOL_LIBRARIES").is_none() {
            let lib = inst.lib.join("libgaspard.so");
            env.push(("OMP_TOOL_LIBRARIES".into(), lib.display().to_string()));
        }
        // Programs on a runtime with an adapter library get it preloaded, with
        // libgaspard before it.
        let adapters = adapters_for(&cmd, &inst.lib);
        if !adapters.is_empty() {
            let mut preload = vec![inst.lib.join("libgaspard.so").display().to_string()];
            preload.extend(adapters.iter().map(|a| a.display().to_string()));
            if let Some(old) = std::env::var_os("LD_PRELOAD") {
                preload.push(old.to_string_lossy().into_owned());
            }
            env.push(("LD_PRELOAD".into(), preload.join(":")));
        }
    }
    let launcher = std::path::Path::new(&cmd[0])
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| LAUNCHERS.contains(&n));
    let mut command = std::process::Command::new(&cmd[0]);
    // Launcher options go after `-np N` (cafrun takes only that one first).
    let at = cmd
        .iter()
        .position(|a| a == "-np" || a == "-n")
        .map_or(1, |i| (i + 2).min(cmd.len()));
    for (k, v) in &env {
        if launcher && k == "LD_PRELOAD" {
            // Preload into the launched processes, not into the launcher itself.
            cmd.insert(at, format!("{k}={v}"));
            cmd.insert(at, "-x".into());
        } else {
            command.env(k, v);
        }
    }
    command.args(&cmd[1..]);
    let status = command
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

/// Whether `a` is the file name that follows `--profile-only`.
fn is_profile_only_value(args: &[String], a: &String) -> bool {
    args.windows(2)
        .any(|w| w[0] == "--profile-only" && std::ptr::eq(&w[1], a))
}

fn read(dir: &std::path::Path) -> Result<trace::Trace> {
    if !dir.exists() {
        bail!("{} does not exist", dir.display());
    }
    warn_if_too_big(dir);
    Ok(trace::read(dir)?)
}

/// Memory reading a trace takes and analysing it, per event, about (peak
/// of `gaspard report`, see BENCHMARKS.md).
const BYTES_PER_EVENT: u64 = 128;

/// The events a trace's chunk headers announce, and the processes whose
/// stream files announce them (`None` when `dir` cannot be listed).
fn trace_events(dir: &std::path::Path) -> Option<(u64, usize)> {
    let mut processes = std::collections::HashSet::new();
    let mut events = 0u64;
    for p in std::fs::read_dir(dir).ok()?.flatten().map(|e| e.path()) {
        if p.extension().is_none_or(|x| x != "gst") {
            continue;
        }
        let Ok(n) = gaspard_format::stream::announced_events(&p) else {
            continue;
        };
        events = events.saturating_add(n);
        // HOST-PID-STREAM.gst: a process is HOST-PID.
        if let Some((process, _)) = p
            .file_stem()
            .and_then(|s| s.to_str())
            .and_then(|s| s.rsplit_once('-'))
        {
            processes.insert(process.to_string());
        }
    }
    Some((events, processes.len()))
}

/// The events a trace's chunk headers announce, the memory reading and
/// analysing them takes, and the memory available (`None` when unknown).
fn trace_size(dir: &std::path::Path) -> Option<(u64, u64, u64)> {
    let (events, _) = trace_events(dir)?;
    let need = events.saturating_mul(BYTES_PER_EVENT);
    // GASPARD_MEMORY (bytes): the memory the commands may use, instead of
    // what the system has available.
    if let Some(cap) = std::env::var("GASPARD_MEMORY")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        return Some((events, need, cap));
    }
    let free = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let l = m.lines().find(|l| l.starts_with("MemAvailable:"))?;
            l.split_whitespace().nth(1)?.parse::<u64>().ok()
        })?;
    Some((events, need, free * 1024))
}

/// Says so before reading a trace that may not fit in the memory available.
fn warn_if_too_big(dir: &std::path::Path) {
    if let Some((events, need, free)) = trace_size(dir).filter(|&(_, need, free)| need > free) {
        eprintln!(
            "gaspard: warning: the trace holds about {events} events, which take about {:.1} GB of \
             memory to read and analyse; {:.1} GB are available, so this may fail. `gaspard report \
             DIR --low-memory` reads it one process at a time; `mpirun -np N gaspard report DIR \
             --mpi` shares it among machines; `gaspard view DIR` shows its timeline in less.",
            need as f64 / 1e9,
            free as f64 / 1e9
        );
    }
}

/// Whether a trace looks too big to read whole in the memory available
/// (then `report` reads it one process at a time, and says so).
pub(crate) fn too_big(dir: &std::path::Path) -> bool {
    let Some((events, need, free)) = trace_size(dir).filter(|&(_, need, free)| need > free) else {
        return false;
    };
    eprintln!(
        "gaspard: the trace holds about {events} events, which take about {:.1} GB of memory to \
         read whole; {:.1} GB are available: it is read one process at a time (--low-memory)",
        need as f64 / 1e9,
        free as f64 / 1e9
    );
    true
}

/// Events from which `export` and `blocks` read a trace of several
/// processes one process at a time without being asked: there it takes
/// less time as well as less memory than reading the trace whole, which
/// spends as long again in the kernel getting fresh memory (BENCHMARKS.md,
/// "Exports and blocks one process at a time by default").
const BY_PROCESS_EVENTS: u64 = 8_000_000;

/// Whether `export` and `blocks` read `dir` one process at a time when
/// not asked to: a trace of several processes holding [`BY_PROCESS_EVENTS`]
/// events or more (unless `in_memory`), or one too big for the memory
/// available ([`too_big`], which says so).
fn by_process(dir: &std::path::Path, in_memory: bool) -> bool {
    let big = |(events, processes): (u64, usize)| processes > 1 && events >= BY_PROCESS_EVENTS;
    (!in_memory && trace_events(dir).is_some_and(big)) || too_big(dir)
}

fn main() -> ExitCode {
    // Printing into a closed pipe (`gaspard dump | head`) should end quietly.
    // SAFETY: restoring the default disposition of SIGPIPE has no preconditions.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let argv: Vec<String> = std::env::args().collect();
    if let Some(compiler) = argv.first().and_then(|a| cc::compiler_for(a)) {
        return match cc::run(compiler, &argv[1..]) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("gaspard cc: error: {e:#}");
                ExitCode::from(2)
            }
        };
    }
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Run { .. } | Command::Cc { .. }) {
        // The analyses allocate and free windows, tables and summaries as
        // they go: backed by transparent huge pages (which the allocator
        // asks for), each fresh 2 MiB would be cleared whole by the kernel,
        // for a fraction of it used (BENCHMARKS.md: 60 % less memory, less
        // system time). Not for `gaspard run` and `gaspard cc`, whose
        // program and compiler would inherit it.
        // SAFETY: PR_SET_THP_DISABLE takes no pointer and only changes how
        // this process's future page faults are backed; its failure (an old
        // kernel) changes nothing.
        unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    }
    let r = (|| -> Result<ExitCode> {
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        match cli.command {
            Command::Run {
                output,
                exclude,
                include,
                exclude_sites,
                profile_only,
                cmd,
            } => {
                let filters = [
                    ("GASPARD_EXCLUDE", exclude),
                    ("GASPARD_INCLUDE", include),
                    ("GASPARD_EXCLUDE_SITES", exclude_sites),
                    (
                        "GASPARD_PROFILE_ONLY",
                        profile_only.then(|| "1".to_string()),
                    ),
                ];
                return run(output, &filters, cmd);
            }
            Command::Cc { args } => {
                // The wrapper's options come first, then the compiler: `gaspard cc --profile -- cc a.c`.
                let (ours, rest): (Vec<String>, Vec<String>) = {
                    let pos = args.iter().position(|a| a == "--").unwrap_or_else(|| {
                        args.iter()
                            .position(|a| {
                                !a.starts_with("--profile") && !is_profile_only_value(&args, a)
                            })
                            .unwrap_or(args.len())
                    });
                    let rest = args[pos..]
                        .iter()
                        .skip_while(|a| *a == "--")
                        .cloned()
                        .collect();
                    (args[..pos].to_vec(), rest)
                };
                let Some((compiler, cargs)) = rest.split_first() else {
                    bail!("gaspard cc: name the compiler, e.g. gaspard cc --profile -- cc app.c");
                };
                let mut all = ours;
                all.extend(cargs.iter().cloned());
                return cc::run(compiler, &all);
            }
            Command::Dump {
                dir,
                json,
                low_memory,
            } => {
                if !dir.exists() {
                    bail!("{} does not exist", dir.display());
                }
                if low_memory || too_big(&dir) {
                    let r = gaspard_analyze::distributed::ByProcess::open(&dir)?;
                    if json {
                        dump::write_json_by_process(&r, &mut out)?;
                        writeln!(out)?;
                    } else {
                        dump::to_text_by_process(&r, &mut out)?;
                    }
                } else {
                    let t = read(&dir)?;
                    if json {
                        dump::write_json(&t, &mut out)?;
                        writeln!(out)?;
                    } else {
                        dump::to_text(&t, &mut out)?;
                    }
                }
            }
            Command::Report {
                dir,
                json,
                block_size,
                mpi: true,
                low_memory,
                ..
            } => {
                let m = mpi::Mpi::start()?;
                if !dir.exists() {
                    if m.rank() == 0 {
                        eprintln!("gaspard: error: {} does not exist", dir.display());
                    }
                    m.finish();
                    return Ok(ExitCode::from(2));
                }
                match gaspard_analyze::distributed::report(&dir, block_size, &m, low_memory) {
                    Ok(Some(r)) => {
                        if json {
                            serde_json::to_writer_pretty(&mut out, &r)?;
                            writeln!(out)?;
                        } else {
                            profile::to_text(&r, &mut out)?;
                        }
                        out.flush()?;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        // The other ranks may be waiting for this one.
                        eprintln!("gaspard: error (rank {}): {e}", m.rank());
                        m.abort(2);
                    }
                }
                m.finish();
            }
            Command::Report {
                dir,
                json,
                html,
                block_size,
                mpi: false,
                low_memory,
                in_memory,
            } => {
                // Without the browser view, one process at a time: the
                // report is the same, in memory that does not grow with the
                // trace, and in less time than reading it whole, which
                // spends as long again in the kernel getting fresh memory.
                let whole = html.is_some() || in_memory;
                let low_memory = !whole || low_memory || too_big(&dir);
                let r = if low_memory {
                    if !dir.exists() {
                        bail!("{} does not exist", dir.display());
                    }
                    // Its progress bar counts the bytes of both readings.
                    let r = gaspard_analyze::distributed::report_by_process(&dir, block_size)?;
                    if let Some(file) = html {
                        let note = "The trace was analysed one process at a time (--low-memory): \
                                    the timeline is a quick scan's, without the coarray operations \
                                    recognised in MPI calls or the source lines of code addresses.";
                        let page = gaspard_web::View::quick_with_report(&dir, &r, note)?.html();
                        std::fs::write(&file, page)
                            .with_context(|| format!("cannot write {}", file.display()))?;
                    }
                    r
                } else if let Some((view, r)) = match &html {
                    Some(_) => gaspard_web::View::big_with_report(&dir, block_size)?,
                    None => None,
                } {
                    // A big trace whose quick scan is its whole timeline:
                    // the page without the whole trace in memory.
                    if let Some(file) = html {
                        std::fs::write(&file, view.html())
                            .with_context(|| format!("cannot write {}", file.display()))?;
                    }
                    r
                } else {
                    let t = read(&dir)?;
                    let busy = gaspard_analyze::progress::spinner(
                        &format!("analysing {} events", t.events()),
                        t.events(),
                    );
                    let r = profile::report_with(&t, block_size);
                    drop(busy);
                    if let Some(file) = html {
                        let page = gaspard_web::View::with_report(t, &r).html();
                        std::fs::write(&file, page)
                            .with_context(|| format!("cannot write {}", file.display()))?;
                    }
                    r
                };
                if json {
                    serde_json::to_writer_pretty(&mut out, &r)?;
                    writeln!(out)?;
                } else {
                    profile::to_text(&r, &mut out)?;
                }
            }
            Command::Blocks {
                dir,
                json,
                block_size,
                low_memory,
                in_memory,
            } => {
                if !dir.exists() {
                    bail!("{} does not exist", dir.display());
                }
                let b = if low_memory || by_process(&dir, in_memory) {
                    gaspard_analyze::blocks::analyse_by_process(&dir, block_size)?
                } else {
                    let t = read(&dir)?;
                    gaspard_analyze::blocks::analyse(&t, block_size)
                };
                if json {
                    serde_json::to_writer(&mut out, &gaspard_analyze::blocks::to_json(&b))?;
                    writeln!(out)?;
                } else {
                    gaspard_analyze::blocks::epochs_to_text(&b, &mut out)?;
                }
            }
            Command::View {
                dir,
                port,
                block_size,
            } => {
                if !dir.exists() {
                    bail!("{} does not exist", dir.display());
                }
                let server = gaspard_web::server::Server::bind(
                    gaspard_web::View::open(&dir, block_size)?,
                    port,
                )
                .with_context(|| format!("cannot listen on 127.0.0.1:{port}"))?;
                writeln!(out, "gaspard view: http://{}/", server.addr()?)?;
                out.flush()?;
                drop(out);
                server.run()?;
                return Ok(ExitCode::SUCCESS);
            }
            Command::Compare {
                dirs,
                json,
                top,
                keep_order,
            } => compare::run(&dirs, json, top, keep_order, &mut out)?,
            Command::Export {
                dir,
                format,
                output,
                force,
                low_memory,
                in_memory,
            } => {
                let format = match format {
                    ExportFormat::Otf2 => gaspard_export::Format::Otf2,
                    ExportFormat::Perfetto => gaspard_export::Format::Perfetto,
                    ExportFormat::Parquet => gaspard_export::Format::Parquet,
                };
                // Checked before reading a possibly big trace.
                if let (Ok(o), Ok(d)) = (output.canonicalize(), dir.canonicalize()) {
                    if d.starts_with(&o) {
                        bail!(
                            "{} holds the trace {}: choose another output",
                            output.display(),
                            dir.display()
                        );
                    }
                }
                if !force && output.symlink_metadata().is_ok() {
                    bail!(
                        "{} already exists: choose another output or pass --force to replace it",
                        output.display()
                    );
                }
                // The output's directory is made before the trace is read:
                // a place that cannot be written to is said at once.
                if let Some(parent) = output.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(parent)
                        .with_context(|| format!("cannot create {}", parent.display()))?;
                }
                if !dir.exists() {
                    bail!("{} does not exist", dir.display());
                }
                let summary = if low_memory || by_process(&dir, in_memory) {
                    gaspard_export::export_by_process(&dir, format, &output, force)?
                } else {
                    let t = read(&dir)?;
                    if t.streams.is_empty() {
                        bail!(
                            "{} holds no events to export (its processes were recorded in profile-only mode: see `gaspard report`)",
                            dir.display()
                        );
                    }
                    if !t.problems.is_empty() {
                        eprintln!(
                            "gaspard: note: the trace has {} problem(s), exported as read (`gaspard report` lists them)",
                            t.problems.len()
                        );
                    }
                    gaspard_export::export(&t, format, &output, force)?
                };
                for line in summary.lines {
                    writeln!(out, "{line}")?;
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
