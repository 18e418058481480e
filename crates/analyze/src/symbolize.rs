//! Code addresses (OpenMP constructs' `codeptr`) to source lines, through the
//! process's executable mappings (`<process>.maps`) and the binaries' DWARF.

use rustc_hash::FxHashMap as HashMap;
use std::borrow::Cow;
use std::path::{Path, PathBuf};

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol};

/// One executable file mapping of a process.
#[derive(Debug, Clone)]
struct Mapping {
    start: u64,
    end: u64,
    offset: u64,
    path: PathBuf,
}

/// A binary's debug information and its segments (file offset, size, address).
struct Binary {
    loader: addr2line::Loader,
    segments: Vec<(u64, u64, u64)>,
    /// The address its first segment is linked at, to the page (the start
    /// of the module, which `dladdr` gives as `dli_fbase`, once loaded).
    base: u64,
    /// Its dynamic symbols' names: a call site named `name+0xOFFSET` by one
    /// of them is inside that function, not at an offset in the module.
    exported: rustc_hash::FxHashSet<String>,
}

/// Resolves addresses of one trace's processes, caching everything.
#[derive(Default)]
pub struct Symbolizer {
    maps: HashMap<String, Vec<Mapping>>,
    binaries: HashMap<PathBuf, Option<Binary>>,
    cache: HashMap<(String, u64), Option<(String, u32)>>,
    /// Per binary, its data symbols (address, size, name) by address.
    data: HashMap<PathBuf, Vec<(u64, u64, String)>>,
    /// Per process, the full names of the source files its binaries'
    /// debugging information names, by their last part
    /// ([`Symbolizer::full_file_name`]).
    sources: HashMap<String, HashMap<String, Vec<String>>>,
    /// Per binary, the same ([`source_files`]).
    binary_sources: HashMap<PathBuf, Vec<String>>,
}

impl std::fmt::Debug for Symbolizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbolizer")
            .field("processes", &self.maps.len())
            .finish()
    }
}

fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (range, offset, path) = (f.first()?, f.get(2)?, f.get(5)?);
            let (s, e) = range.split_once('-')?;
            Some(Mapping {
                start: u64::from_str_radix(s, 16).ok()?,
                end: u64::from_str_radix(e, 16).ok()?,
                offset: u64::from_str_radix(offset, 16).ok()?,
                path: PathBuf::from(path),
            })
        })
        .collect()
}

fn load(path: &Path) -> Option<Binary> {
    let data = std::fs::read(path).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let segments = file
        .segments()
        .map(|s| {
            let (off, size) = s.file_range();
            (off, size, s.address())
        })
        .collect();
    let base = file.segments().map(|s| s.address()).min().unwrap_or(0) & !0xfff;
    let exported = file
        .dynamic_symbols()
        .filter_map(|s| s.name().ok().map(str::to_string))
        .collect();
    let loader = addr2line::Loader::new(path).ok()?;
    Some(Binary {
        loader,
        segments,
        base,
        exported,
    })
}

/// The full names of the source files whose lines the debugging
/// information of the binary at `path` gives (each unit's compilation
/// directory, the file's directory and its name put together, as the
/// source lines of return addresses are named); none without it.
fn source_files(path: &Path) -> Vec<String> {
    use addr2line::gimli;
    let Ok(data) = std::fs::read(path) else {
        return Vec::new();
    };
    let Ok(file) = object::File::parse(&*data) else {
        return Vec::new();
    };
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let load = |id: gimli::SectionId| -> Result<Cow<'_, [u8]>, gimli::Error> {
        Ok(file
            .section_by_name(id.name())
            .and_then(|s| s.uncompressed_data().ok())
            .unwrap_or(Cow::Borrowed(&[])))
    };
    let Ok(sections) = gimli::DwarfSections::load(load) else {
        return Vec::new();
    };
    let dwarf = sections.borrow(|s| gimli::EndianSlice::new(s, endian));
    let text = |unit: &gimli::Unit<_>, v| {
        dwarf
            .attr_string(unit, v)
            .map(|s| s.to_string_lossy().into_owned())
            .ok()
    };
    let mut out = Vec::new();
    let mut units = dwarf.units();
    while let Ok(Some(header)) = units.next() {
        let Ok(unit) = dwarf.unit(header) else {
            continue;
        };
        let Some(program) = unit.line_program.clone() else {
            continue;
        };
        let header = program.header();
        for f in header.file_names() {
            let Some(name) = text(&unit, f.path_name()) else {
                continue;
            };
            let mut full = PathBuf::new();
            if let Some(dir) = &unit.comp_dir {
                full.push(&*dir.to_string_lossy());
            }
            if let Some(dir) = f.directory(header).and_then(|d| text(&unit, d)) {
                full.push(dir);
            }
            full.push(name);
            if full.is_absolute() {
                out.push(full.to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Full file names by their last part (each once).
fn by_last_part(files: Vec<String>) -> HashMap<String, Vec<String>> {
    let mut out: HashMap<String, Vec<String>> = HashMap::default();
    for f in files {
        let same = out
            .entry(f.rsplit('/').next().unwrap_or_default().to_string())
            .or_default();
        if !same.contains(&f) {
            same.push(f);
        }
    }
    out
}

/// The module and offset of a static function as the C function hooks name
/// it (`module+0xOFFSET`: the dynamic linker knows no name for it), else None.
pub fn static_function(text: &str) -> Option<(&str, u64)> {
    let (module, hex) = text.rsplit_once("+0x")?;
    let offset = u64::from_str_radix(hex, 16).ok()?;
    (!module.is_empty() && !module.contains('/')).then_some((module, offset))
}

/// A C++ symbol's name as its source writes it (`solver::step(int)` for
/// `_ZN6solver4stepEi`), or None when `name` is not a mangled C++ name.
pub fn demangled(name: &str) -> Option<String> {
    if !name.starts_with("_Z") {
        return None;
    }
    cpp_demangle::Symbol::new(name).ok()?.demangle().ok()
}

impl Symbolizer {
    /// Reads the process maps found in `dir`.
    pub fn new(dir: &Path) -> Symbolizer {
        let mut s = Symbolizer::default();
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                let p = e.path();
                if p.extension().and_then(|x| x.to_str()) == Some("maps") {
                    if let (Some(stem), Ok(text)) = (p.file_stem(), std::fs::read_to_string(&p)) {
                        s.maps
                            .insert(stem.to_string_lossy().into_owned(), parse_maps(&text));
                    }
                }
            }
        }
        s
    }

    /// True when no process left a map.
    pub fn is_empty(&self) -> bool {
        self.maps.is_empty()
    }

    /// The source file and line of a return address in `process`.
    pub fn source_of_return_address(&mut self, process: &str, addr: u64) -> Option<(String, u32)> {
        if addr == 0 {
            return None;
        }
        let key = (process.to_string(), addr);
        if let Some(hit) = self.cache.get(&key) {
            return hit.clone();
        }
        let found = self.resolve(process, addr.saturating_sub(1));
        self.cache.insert(key, found.clone());
        found
    }

    /// The full name of the source file a program of `process` names
    /// `name` (relative, as its compiler was given it: `__FILE__`), from
    /// the debugging information of its binaries (gaspard's own aside):
    /// the one file whose full name ends with it, if exactly one does.
    /// None for a full name, one that goes up (`..`), or a process whose
    /// binaries have no such information.
    pub fn full_file_name(&mut self, process: &str, name: &str) -> Option<String> {
        if name.starts_with('/') {
            return None;
        }
        let parts: Vec<&str> = (name.split('/'))
            .filter(|p| !p.is_empty() && *p != ".")
            .collect();
        if parts.is_empty() || parts.contains(&"..") {
            return None;
        }
        let tail = format!("/{}", parts.join("/"));
        if !self.sources.contains_key(process) {
            let binaries: std::collections::BTreeSet<PathBuf> =
                (self.maps.get(process).into_iter().flatten())
                    .map(|m| m.path.clone())
                    .filter(|p| {
                        !p.file_name()
                            .is_some_and(|f| f.to_string_lossy().starts_with("libgaspard"))
                    })
                    .collect();
            let mut files = Vec::new();
            for b in binaries {
                let known = self.binary_sources.entry(b);
                files.extend_from_slice(known.or_insert_with_key(|b| source_files(b)));
            }
            self.sources
                .insert(process.to_string(), by_last_part(files));
        }
        let last = parts.last()?;
        let same = self.sources.get(process)?.get(*last)?;
        let mut found = same.iter().filter(|f| f.ends_with(&tail));
        let first = found.next()?;
        found.next().is_none().then(|| first.clone())
    }

    /// The name of the function that begins `offset` bytes from the start of
    /// the module named `module` (its file name) in `process`, from the
    /// binary's symbol table: how the C function hooks name a static
    /// function, which the dynamic linker cannot name (`module+0xOFFSET`).
    pub fn function_at(&mut self, process: &str, module: &str, offset: u64) -> Option<String> {
        let bin = self.module(process, module)?;
        let probe = bin.base.checked_add(offset)?;
        let sym = bin.loader.find_symbol_info(probe)?;
        (sym.address() == probe).then(|| sym.name().to_string())
    }

    /// The name of the variable (a data symbol of the binary's symbol
    /// table) that holds the byte `offset` bytes from the start of the module
    /// named `module` (its file name) in any process: how a lock in a
    /// binary's data, named `module+0xOFFSET`, gets its source's name.
    pub fn data_symbol(&mut self, module: &str, offset: u64) -> Option<String> {
        let path = self
            .maps
            .values()
            .flatten()
            .find(|m| m.path.file_name().is_some_and(|f| f == module))?
            .path
            .clone();
        let base = self
            .binaries
            .entry(path.clone())
            .or_insert_with(|| load(&path))
            .as_ref()?
            .base;
        let probe = base.checked_add(offset)?;
        let symbols = self.data.entry(path.clone()).or_insert_with(|| {
            let Ok(bytes) = std::fs::read(&path) else {
                return Vec::new();
            };
            let Ok(file) = object::File::parse(&*bytes) else {
                return Vec::new();
            };
            let mut v: Vec<(u64, u64, String)> = file
                .symbols()
                .chain(file.dynamic_symbols())
                .filter(|s| s.kind() == object::SymbolKind::Data && s.is_definition())
                .filter_map(|s| Some((s.address(), s.size().max(1), s.name().ok()?.to_string())))
                .collect();
            v.sort();
            v.dedup_by(|a, b| a.0 == b.0);
            v
        });
        let i = symbols
            .partition_point(|&(a, _, _)| a <= probe)
            .checked_sub(1)?;
        let (a, size, name) = &symbols[i];
        (probe < a + size).then(|| name.clone())
    }

    /// A function's name as the trace gives it: a static function's
    /// `module+0xOFFSET` ([`static_function`]) named by [`Symbolizer::function_at`]
    /// when it can be, any other text as it is.
    pub fn function_name<'a>(&mut self, process: &str, text: &'a str) -> Cow<'a, str> {
        match static_function(text)
            .and_then(|(module, offset)| self.function_at(process, module, offset))
        {
            Some(name) => demangled(&name).map_or(name, Into::into).into(),
            None => demangled(text).map_or(text.into(), Into::into),
        }
    }

    /// A note of the C function hooks and allocation wrappers as the report
    /// gives it: each `function NAME` named as [`Symbolizer::function_name`]
    /// names it, each call site
    /// `at module+0xOFFSET` (a return address) given its source line.
    pub fn name_note(&mut self, process: &str, note: &str) -> String {
        let mut out = String::with_capacity(note.len());
        let mut before = "";
        for (i, word) in note.split(' ').enumerate() {
            if i > 0 {
                out.push(' ');
            }
            let bare = word.trim_end_matches([':', ',', ';']);
            let named = match before {
                "function" => match self.function_name(process, bare) {
                    Cow::Owned(name) => Some(name),
                    Cow::Borrowed(_) => None,
                },
                "at" => static_function(bare).and_then(|(module, offset)| {
                    self.source_at(process, module, offset.checked_sub(1)?)
                        .map(|(file, line)| format!("{file}:{line}"))
                }),
                _ => None,
            };
            match named {
                Some(n) => {
                    out.push_str(&n);
                    out.push_str(&word[bare.len()..]);
                }
                None => out.push_str(word),
            }
            before = word;
        }
        out
    }

    /// The source line of the code `offset` bytes from the start of the
    /// module named `module` in `process`.
    fn source_at(&mut self, process: &str, module: &str, offset: u64) -> Option<(String, u32)> {
        let bin = self.module(process, module)?;
        // `module+0xOFFSET` may also be a call site in an exported function
        // of that name (an executable named as one of its functions): then
        // which one it is cannot be told.
        if bin.exported.contains(module) {
            return None;
        }
        let loc = bin
            .loader
            .find_location(bin.base.checked_add(offset)?)
            .ok()??;
        Some((loc.file?.to_string(), loc.line?))
    }

    /// The binary of the module named `module` (its file name) in `process`.
    fn module(&mut self, process: &str, module: &str) -> Option<&Binary> {
        let path = &self
            .maps
            .get(process)?
            .iter()
            .find(|m| m.path.file_name().is_some_and(|f| f == module))?
            .path;
        self.binaries
            .entry(path.clone())
            .or_insert_with(|| load(path))
            .as_ref()
    }

    fn resolve(&mut self, process: &str, addr: u64) -> Option<(String, u32)> {
        let m = self
            .maps
            .get(process)?
            .iter()
            .find(|m| m.start <= addr && addr < m.end)?
            .clone();
        let file_offset = addr - m.start + m.offset;
        let bin = self
            .binaries
            .entry(m.path.clone())
            .or_insert_with(|| load(&m.path))
            .as_ref()?;
        let &(off, _, vaddr) = bin
            .segments
            .iter()
            .find(|(off, size, _)| *off <= file_offset && file_offset < off + size)?;
        let probe = vaddr + (file_offset - off);
        let loc = bin.loader.find_location(probe).ok()??;
        Some((loc.file?.to_string(), loc.line?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A relative name is given the one full name that ends with it, whole
    /// parts of it; none when several do, or none, or it goes up.
    #[test]
    fn relative_names_get_the_one_full_name_that_ends_with_them() {
        let mut s = Symbolizer::default();
        let files = [
            "/a/src/x.c",
            "/b/src/y.c",
            "/c/src/y.c",
            "/d/inc/z.h",
            "/a/src/x.c",
        ];
        s.sources
            .insert("p".into(), by_last_part(files.map(String::from).to_vec()));
        let full = |s: &mut Symbolizer, name: &str| s.full_file_name("p", name);
        assert_eq!(full(&mut s, "x.c").as_deref(), Some("/a/src/x.c"));
        assert_eq!(full(&mut s, "src/x.c").as_deref(), Some("/a/src/x.c"));
        assert_eq!(full(&mut s, "./src//x.c").as_deref(), Some("/a/src/x.c"));
        assert_eq!(full(&mut s, "b/src/y.c").as_deref(), Some("/b/src/y.c"));
        // Two files end with it.
        assert_eq!(full(&mut s, "y.c"), None);
        assert_eq!(full(&mut s, "src/y.c"), None);
        // Only whole parts count.
        assert_eq!(full(&mut s, "rc/x.c"), None);
        assert_eq!(full(&mut s, "../inc/z.h"), None);
        assert_eq!(full(&mut s, "/a/src/x.c"), None);
        assert_eq!(full(&mut s, "w.c"), None);
        assert_eq!(full(&mut s, ""), None);
        // Another process's program has none of them.
        assert_eq!(s.full_file_name("q", "x.c"), None);
    }

    #[test]
    fn maps_lines_parse() {
        let m = parse_maps(
            "55d0c0a00000-55d0c0a01000 r-xp 00001000 fd:01 123 /usr/bin/prog\nbad line\n",
        );
        assert_eq!(m.len(), 1);
        assert_eq!(
            (m[0].start, m[0].end, m[0].offset),
            (0x55d0c0a00000, 0x55d0c0a01000, 0x1000)
        );
        assert_eq!(m[0].path, PathBuf::from("/usr/bin/prog"));
    }
}
