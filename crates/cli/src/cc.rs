//! `gaspard cc`: the compiler wrapper of GASP Section 3.1.
//!
//! `--profile` (and `--profile-local`, the same for C, which has no remote
//! accesses) turns on user events (`-DGASPARD_PROFILE=1` for `pupc.h`),
//! function entry and exit (`-finstrument-functions`, named through
//! `-rdynamic`) and the malloc family (`-Wl,--wrap=...`).
//! `--profile-only FILE` does the same for the events FILE names, one per line.
//! Without them, user events compile away and nothing is instrumented.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};

/// What the wrapper was asked for.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Profile {
    /// Instrumentation on.
    pub on: bool,
    /// With `--profile-only`: the events wanted.
    pub only: Option<BTreeSet<String>>,
}

impl Profile {
    fn wants(&self, event: &str) -> bool {
        self.on && self.only.as_ref().is_none_or(|o| o.contains(event))
    }
}

/// C events the wrapper instruments itself; the rest come from runtimes.
const C_EVENTS: [&str; 4] = [
    "GASP_C_FUNC",
    "GASP_C_MALLOC",
    "GASP_C_REALLOC",
    "GASP_C_FREE",
];

/// Reads a `--profile-only` file: symbolic event names, one per line (`#` comments).
pub fn read_profile_only(path: &Path) -> Result<BTreeSet<String>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the --profile-only file {}", path.display()))?;
    let mut set = BTreeSet::new();
    for (no, line) in text.lines().enumerate() {
        let name = line.split('#').next().unwrap_or("").trim();
        if name.is_empty() {
            continue;
        }
        let known = gaspard_format::kinds::kind_by_name(name).is_some()
            || name.starts_with("GASP_")
            || name.starts_with("PUPC_");
        if !known {
            eprintln!(
                "gaspard cc: {}:{}: unknown event name '{name}' ignored",
                path.display(),
                no + 1
            );
            continue;
        }
        set.insert(name.to_string());
    }
    Ok(set)
}

/// Where gaspard's headers and library are.
#[derive(Debug, Clone)]
pub struct Install {
    /// Directory of `gasp.h`, `gasp_upc.h`, `pupc.h`.
    pub include: PathBuf,
    /// Directory of `libgaspard.so`.
    pub lib: PathBuf,
}

/// Finds the headers and library: `GASPARD_INCLUDE_DIR`/`GASPARD_LIB_DIR`,
/// else beside the `gaspard` command (installed: `../include`, `../lib`; in
/// the build tree: the same directory and the source headers).
pub fn find_install() -> Result<Install> {
    if let (Ok(i), Ok(l)) = (
        std::env::var("GASPARD_INCLUDE_DIR"),
        std::env::var("GASPARD_LIB_DIR"),
    ) {
        return Ok(Install {
            include: i.into(),
            lib: l.into(),
        });
    }
    let exe = std::env::current_exe().context("cannot locate the gaspard command")?;
    let exe = exe.canonicalize().unwrap_or(exe);
    let bin = exe
        .parent()
        .context("the gaspard command has no directory")?;
    if let Some(prefix) = bin.parent() {
        if prefix.join("include/gasp.h").exists() && prefix.join("lib/libgaspard.so").exists() {
            return Ok(Install {
                include: prefix.join("include"),
                lib: prefix.join("lib"),
            });
        }
    }
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../gasp/include");
    if bin.join("libgaspard.so").exists() && source.join("gasp.h").exists() {
        return Ok(Install {
            include: source.canonicalize().unwrap_or(source),
            lib: bin.to_path_buf(),
        });
    }
    bail!(
        "cannot find gaspard's headers and library next to {}: set GASPARD_INCLUDE_DIR and GASPARD_LIB_DIR",
        exe.display()
    )
}

/// The compiler command line for `args`.
pub fn command_line(
    compiler: &str,
    args: &[String],
    profile: &Profile,
    inst: &Install,
) -> Vec<String> {
    let links = !args.iter().any(|a| {
        matches!(
            a.as_str(),
            "-c" | "-S" | "-E" | "-M" | "-MM" | "-fsyntax-only"
        )
    });
    let mut cmd = vec![
        compiler.to_string(),
        format!("-I{}", inst.include.display()),
    ];
    if profile.on {
        cmd.push("-DGASPARD_PROFILE=1".into());
    }
    if profile.wants("GASP_C_FUNC") {
        cmd.push("-finstrument-functions".into());
    }
    cmd.extend(args.iter().cloned());
    if links {
        if profile.wants("GASP_C_FUNC") {
            cmd.push("-rdynamic".into());
        }
        for (event, sym) in [
            ("GASP_C_MALLOC", "malloc"),
            ("GASP_C_REALLOC", "realloc"),
            ("GASP_C_FREE", "free"),
        ] {
            if profile.wants(event) {
                cmd.push(format!("-Wl,--wrap={sym}"));
            }
        }
        cmd.push(format!("-L{}", inst.lib.display()));
        cmd.push(format!("-Wl,-rpath,{}", inst.lib.display()));
        cmd.push("-lgaspard".into());
    }
    cmd
}

/// Takes the wrapper's own options out of `args`.
pub fn split_args(args: &[String]) -> Result<(Profile, Vec<String>)> {
    let mut p = Profile::default();
    let mut rest = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--profile" | "--profile-local" => p.on = true,
            "--profile-only" => {
                let f = it.next().context("--profile-only needs a file name")?;
                p.on = true;
                p.only = Some(read_profile_only(Path::new(f))?);
            }
            _ => match a.strip_prefix("--profile-only=") {
                Some(f) => {
                    p.on = true;
                    p.only = Some(read_profile_only(Path::new(f))?);
                }
                None => rest.push(a.clone()),
            },
        }
    }
    if let Some(only) = &p.only {
        let ours: Vec<&str> = C_EVENTS
            .iter()
            .copied()
            .filter(|e| only.contains(*e))
            .collect();
        if std::env::var_os("GASPARD_CC_VERBOSE").is_some() {
            eprintln!("gaspard cc: instrumenting {ours:?} and user events");
        }
    }
    Ok((p, rest))
}

/// Runs the compiler; its exit status is passed on.
pub fn run(compiler: &str, args: &[String]) -> Result<ExitCode> {
    let (profile, rest) = split_args(args)?;
    let inst = find_install()?;
    let cmd = command_line(compiler, &rest, &profile, &inst);
    if std::env::var_os("GASPARD_CC_VERBOSE").is_some() {
        eprintln!("gaspard cc: {}", cmd.join(" "));
    }
    let status = std::process::Command::new(&cmd[0])
        .args(&cmd[1..])
        .status()
        .with_context(|| format!("cannot run the compiler {}", cmd[0]))?;
    Ok(ExitCode::from(
        status.code().unwrap_or(1).clamp(0, 255) as u8
    ))
}

/// The compiler a multi-call name stands for (`gaspard-cc` → `cc`).
pub fn compiler_for(argv0: &str) -> Option<&'static str> {
    let name = Path::new(argv0).file_name()?.to_str()?;
    match name {
        "gaspard-cc" => Some("cc"),
        "gaspard-mpicc" => Some("mpicc"),
        "gaspard-oshcc" => Some("oshcc"),
        "gaspard-caf" => Some("caf"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn flags_follow_the_profile() {
        let inst = Install {
            include: "/i".into(),
            lib: "/l".into(),
        };
        let (p, rest) = split_args(&s(&["--profile", "a.c", "-o", "a"])).unwrap();
        let cmd = command_line("cc", &rest, &p, &inst);
        for f in [
            "-DGASPARD_PROFILE=1",
            "-finstrument-functions",
            "-rdynamic",
            "-Wl,--wrap=malloc",
            "-lgaspard",
        ] {
            assert!(cmd.contains(&f.to_string()), "{f} missing from {cmd:?}");
        }
        let (p, rest) = split_args(&s(&["-c", "a.c"])).unwrap();
        let cmd = command_line("cc", &rest, &p, &inst);
        assert_eq!(
            cmd,
            s(&["cc", "-I/i", "-c", "a.c"]),
            "no profile, compile only: headers only"
        );
    }

    #[test]
    fn profile_only_restricts() {
        let f = std::env::temp_dir().join(format!("gaspard-only-{}", std::process::id()));
        std::fs::write(
            &f,
            "GASP_C_MALLOC\n# a comment\n\nGASP_UPC_GET\nNOT_AN_EVENT\n",
        )
        .unwrap();
        let (p, rest) =
            split_args(&s(&[&format!("--profile-only={}", f.display()), "a.c"])).unwrap();
        let cmd = command_line(
            "cc",
            &rest,
            &p,
            &Install {
                include: "/i".into(),
                lib: "/l".into(),
            },
        );
        assert!(cmd.contains(&"-Wl,--wrap=malloc".to_string()));
        assert!(!cmd.contains(&"-Wl,--wrap=free".to_string()));
        assert!(!cmd.contains(&"-finstrument-functions".to_string()));
        assert!(cmd.contains(&"-DGASPARD_PROFILE=1".to_string()));
        assert!(split_args(&s(&["--profile-only"])).is_err());
        let _ = std::fs::remove_file(&f);
    }

    #[test]
    fn multi_call_names() {
        assert_eq!(compiler_for("/usr/bin/gaspard-mpicc"), Some("mpicc"));
        assert_eq!(compiler_for("gaspard"), None);
    }
}
