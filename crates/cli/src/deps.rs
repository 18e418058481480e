//! The shared libraries a program needs, read from its ELF dynamic section
//! and those of its libraries, without running anything: `gaspard run`
//! asks this of each executable it starts, and `ldd` (a shell script that
//! starts the dynamic loader several times) cost more than the start of a
//! small program.

use std::collections::{BTreeSet, VecDeque};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;
const DT_STRTAB: u64 = 5;
const DT_STRSZ: u64 = 10;
const DT_RPATH: u64 = 15;
const DT_RUNPATH: u64 = 29;

/// What the dynamic section of one ELF file says.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Dynamic {
    /// DT_NEEDED, in order.
    pub needed: Vec<String>,
    /// DT_RPATH, split at ':'.
    pub rpath: Vec<String>,
    /// DT_RUNPATH, split at ':'.
    pub runpath: Vec<String>,
    /// ELFCLASS64 (else 32-bit).
    pub is64: bool,
    /// e_machine.
    pub machine: u16,
}

fn read_at(f: &mut File, off: u64, len: usize) -> Option<Vec<u8>> {
    if len > 64 << 20 {
        return None;
    }
    let mut b = vec![0u8; len];
    f.seek(SeekFrom::Start(off)).ok()?;
    f.read_exact(&mut b).ok()?;
    Some(b)
}

fn u16le(b: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?))
}
fn u32le(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?))
}
fn u64le(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?))
}

/// Reads the dynamic section of `path`. `Ok(None)`: not an ELF file (a
/// script, say), or one without a dynamic section (static). `Err`: an ELF
/// file this reader does not understand (big-endian, damaged).
pub fn read_dynamic(path: &Path) -> Result<Option<Dynamic>, ()> {
    let mut f = File::open(path).map_err(|_| ())?;
    let mut ident = [0u8; 64];
    let n = f.read(&mut ident).map_err(|_| ())?;
    if n < 16 || &ident[..4] != b"\x7fELF" {
        return Ok(None);
    }
    if n < 52 || ident[5] != 1 {
        return Err(()); // not little-endian, or cut short
    }
    let is64 = match ident[4] {
        1 => false,
        2 => true,
        _ => return Err(()),
    };
    let h = &ident[..n];
    let machine = u16le(h, 18).ok_or(())?;
    // Program headers: offset, entry size, count.
    let (phoff, phentsize, phnum) = if is64 {
        (
            u64le(h, 0x20).ok_or(())?,
            u16le(h, 0x36).ok_or(())?,
            u16le(h, 0x38).ok_or(())?,
        )
    } else {
        (
            u64::from(u32le(h, 0x1c).ok_or(())?),
            u16le(h, 0x2a).ok_or(())?,
            u16le(h, 0x2c).ok_or(())?,
        )
    };
    let ph = read_at(&mut f, phoff, usize::from(phentsize) * usize::from(phnum)).ok_or(())?;
    // (type, offset, vaddr, filesz) per program header.
    let mut segs = Vec::new();
    for i in 0..usize::from(phnum) {
        let o = i * usize::from(phentsize);
        let seg = if is64 {
            (
                u32le(&ph, o),
                u64le(&ph, o + 8),
                u64le(&ph, o + 16),
                u64le(&ph, o + 32),
            )
        } else {
            (
                u32le(&ph, o),
                u32le(&ph, o + 4).map(u64::from),
                u32le(&ph, o + 8).map(u64::from),
                u32le(&ph, o + 16).map(u64::from),
            )
        };
        let (Some(t), Some(off), Some(va), Some(sz)) = seg else {
            return Err(());
        };
        segs.push((t, off, va, sz));
    }
    let Some(&(_, dyn_off, _, dyn_size)) = segs.iter().find(|s| s.0 == PT_DYNAMIC) else {
        return Ok(None);
    };
    let d = read_at(&mut f, dyn_off, dyn_size as usize).ok_or(())?;
    let esz = if is64 { 16 } else { 8 };
    let (mut strtab, mut strsz) = (None, None);
    let mut entries = Vec::new();
    for e in d.chunks_exact(esz) {
        let (tag, val) = if is64 {
            (u64le(e, 0).ok_or(())?, u64le(e, 8).ok_or(())?)
        } else {
            (
                u64::from(u32le(e, 0).ok_or(())?),
                u64::from(u32le(e, 4).ok_or(())?),
            )
        };
        match tag {
            DT_NULL => break,
            DT_STRTAB => strtab = Some(val),
            DT_STRSZ => strsz = Some(val),
            DT_NEEDED | DT_RPATH | DT_RUNPATH => entries.push((tag, val)),
            _ => {}
        }
    }
    let mut out = Dynamic {
        is64,
        machine,
        ..Default::default()
    };
    if entries.is_empty() {
        return Ok(Some(out));
    }
    let (Some(strtab), Some(strsz)) = (strtab, strsz) else {
        return Err(());
    };
    // The string table's address, as a file offset through the segment holding it.
    let file_off = segs
        .iter()
        .find(|&&(t, _, va, sz)| t == PT_LOAD && strtab >= va && strtab < va + sz)
        .map(|&(_, off, va, _)| strtab - va + off)
        .ok_or(())?;
    let strs = read_at(&mut f, file_off, strsz as usize).ok_or(())?;
    let string = |at: u64| -> Result<String, ()> {
        let s = strs.get(at as usize..).ok_or(())?;
        let end = s.iter().position(|&c| c == 0).ok_or(())?;
        Ok(String::from_utf8_lossy(&s[..end]).into_owned())
    };
    for (tag, val) in entries {
        let s = string(val)?;
        match tag {
            DT_NEEDED => out.needed.push(s),
            DT_RPATH => out.rpath.extend(s.split(':').map(str::to_string)),
            _ => out.runpath.extend(s.split(':').map(str::to_string)),
        }
    }
    Ok(Some(out))
}

/// The directories of /etc/ld.so.conf (and the files it includes), then the
/// default ones: where the dynamic loader's cache finds libraries.
fn system_dirs() -> Vec<PathBuf> {
    fn conf(path: &Path, out: &mut Vec<PathBuf>, depth: u32) {
        let Ok(text) = std::fs::read_to_string(path) else {
            return;
        };
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            if let Some(pat) = line.strip_prefix("include") {
                for pat in pat.split_whitespace() {
                    if depth < 4 {
                        for f in glob(pat) {
                            conf(&f, out, depth + 1);
                        }
                    }
                }
            } else if line.starts_with('/') {
                out.push(PathBuf::from(line));
            }
        }
    }
    let mut dirs = Vec::new();
    conf(Path::new("/etc/ld.so.conf"), &mut dirs, 0);
    for d in [
        "/lib/x86_64-linux-gnu",
        "/usr/lib/x86_64-linux-gnu",
        "/lib64",
        "/usr/lib64",
        "/lib",
        "/usr/lib",
    ] {
        dirs.push(PathBuf::from(d));
    }
    dirs
}

/// Files matching `pat`, whose last component may hold one `*`.
fn glob(pat: &str) -> Vec<PathBuf> {
    let p = Path::new(pat);
    let (Some(dir), Some(name)) = (p.parent(), p.file_name().and_then(|n| n.to_str())) else {
        return Vec::new();
    };
    let Some((pre, post)) = name.split_once('*') else {
        return vec![p.to_path_buf()];
    };
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name().to_str().is_some_and(|n| {
                n.len() >= pre.len() + post.len() && n.starts_with(pre) && n.ends_with(post)
            })
        })
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

fn expand_origin(dir: &str, origin: &Path) -> PathBuf {
    let o = origin.display().to_string();
    PathBuf::from(dir.replace("${ORIGIN}", &o).replace("$ORIGIN", &o))
}

/// The file names (sonames and resolved paths) of every library `exe`
/// loads, directly or not. `None` when that cannot be told without the
/// dynamic loader: an ELF file this reader does not understand, or a
/// library not found where the loader would look (its cache may know more).
pub fn libraries(exe: &Path) -> Option<Vec<String>> {
    let top = match read_dynamic(exe) {
        Ok(Some(d)) => d,
        Ok(None) => return Some(Vec::new()),
        Err(()) => return None,
    };
    let env_dirs: Vec<String> = std::env::var("LD_LIBRARY_PATH")
        .map(|v| {
            v.split([':', ';'])
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let mut system: Option<Vec<PathBuf>> = None;
    let mut names = Vec::new();
    let mut seen = BTreeSet::new();
    // The executable's DT_RPATH applies to every library it loads (unless DT_RUNPATH is set).
    let exe_dir = exe.parent().unwrap_or(Path::new("/")).to_path_buf();
    let exe_rpath: Vec<PathBuf> = if top.runpath.is_empty() {
        top.rpath
            .iter()
            .map(|d| expand_origin(d, &exe_dir))
            .collect()
    } else {
        Vec::new()
    };
    let (is64, machine) = (top.is64, top.machine);
    let mut queue = VecDeque::from([(exe_dir, top)]);
    while let Some((origin, d)) = queue.pop_front() {
        let mut dirs: Vec<PathBuf> = Vec::new();
        if d.runpath.is_empty() {
            dirs.extend(d.rpath.iter().map(|r| expand_origin(r, &origin)));
            dirs.extend(exe_rpath.iter().cloned());
        }
        dirs.extend(env_dirs.iter().map(PathBuf::from));
        dirs.extend(d.runpath.iter().map(|r| expand_origin(r, &origin)));
        for need in &d.needed {
            if !seen.insert(need.clone()) {
                continue;
            }
            names.push(need.clone());
            let found = if need.contains('/') {
                Some(PathBuf::from(need))
            } else {
                let sys = system.get_or_insert_with(system_dirs);
                dirs.iter().chain(sys.iter()).find_map(|dir| {
                    let p = dir.join(need);
                    // Only a library of the same class and machine, as the loader takes.
                    match read_dynamic(&p) {
                        Ok(Some(l)) if l.is64 == is64 && l.machine == machine => Some(p),
                        _ => None,
                    }
                })
            };
            let path = found?;
            let lib = match read_dynamic(&path) {
                Ok(Some(l)) => l,
                Ok(None) => continue,
                Err(()) => return None,
            };
            names.push(path.display().to_string());
            let dir = path.parent().unwrap_or(Path::new("/")).to_path_buf();
            queue.push_back((dir, lib));
        }
    }
    Some(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_its_own_libraries() {
        let me = std::env::current_exe().unwrap();
        let libs = libraries(&me).expect("the test binary's libraries are found");
        assert!(libs.iter().any(|l| l.starts_with("libc.so")), "{libs:?}");
        // As the dynamic loader says.
        let out = std::process::Command::new("ldd").arg(&me).output().unwrap();
        let ldd = String::from_utf8_lossy(&out.stdout);
        for line in ldd.lines() {
            let name = line.split_whitespace().next().unwrap_or("");
            if name.starts_with("lib") && line.contains("=>") {
                assert!(
                    libs.iter().any(|l| l == name),
                    "{name} missing from {libs:?}"
                );
            }
        }
    }

    #[test]
    fn scripts_and_missing_files() {
        let dir = std::env::temp_dir().join(format!("gaspard-deps-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("s.sh");
        std::fs::write(&script, "#!/bin/sh\ntrue\n").unwrap();
        assert_eq!(libraries(&script), Some(Vec::new()));
        let elf = dir.join("bad");
        let mut big_endian = b"\x7fELF\x02\x02\x01".to_vec();
        big_endian.resize(64, 0);
        std::fs::write(&elf, big_endian).unwrap();
        assert_eq!(libraries(&elf), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
