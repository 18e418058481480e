//! Filters by event name and callsite, for long runs: events a user does not
//! need are left out at the source, counted, and the count is written in the
//! manifest.
//!
//! - `GASPARD_EXCLUDE=NAME,...`: leave out these events. A name is a kind's
//!   symbolic name (`GASP_C_MALLOC`, `GASP_SHMEM_PUTMEM`) or a user event's
//!   name; a trailing `*` matches every name with that prefix
//!   (`GASP_SHMEM_LONG_*`).
//! - `GASPARD_INCLUDE=NAME,...`: record only these (and gaspard's own events).
//! - `GASPARD_EXCLUDE_SITES=FILE[:LINE],...`: leave out the events made at
//!   these source positions; FILE matches a path that ends with it after a
//!   `/` (`heat.c` matches `/src/heat.c`).
//!
//! The C hot path checks one flag; the work is done only when a filter is set.

use std::sync::OnceLock;

use gaspard_format::kinds;

extern "C" {
    fn gaspard_filter_kind(kind: u32);
    fn gaspard_filter_user(base: u32, index: u32);
    fn gaspard_filter_site(file: *const std::ffi::c_char, line: u32) -> i32;
    fn gaspard_filter_enable(on: i32);
}

/// Name patterns, as parsed.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Filters {
    exclude: Vec<String>,
    include: Option<Vec<String>>,
    sites: Vec<(String, u32)>,
    /// How the filters were given, for the manifest's note.
    pub(crate) text: String,
    /// Problems with the settings.
    pub(crate) warnings: Vec<String>,
}

fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

fn list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

impl Filters {
    /// From the values of GASPARD_EXCLUDE, GASPARD_INCLUDE and
    /// GASPARD_EXCLUDE_SITES.
    pub(crate) fn parse(
        exclude: Option<&str>,
        include: Option<&str>,
        sites: Option<&str>,
    ) -> Filters {
        let mut f = Filters {
            exclude: exclude.map(list).unwrap_or_default(),
            include: include.map(list),
            ..Default::default()
        };
        let mut text = Vec::new();
        if let Some(v) = exclude {
            text.push(format!("GASPARD_EXCLUDE={v}"));
        }
        if let Some(v) = include {
            text.push(format!("GASPARD_INCLUDE={v}"));
        }
        if let Some(v) = sites {
            text.push(format!("GASPARD_EXCLUDE_SITES={v}"));
            for s in list(v) {
                let (file, line) = match s.rsplit_once(':') {
                    Some((name, l)) => match l.parse::<u32>() {
                        Ok(n) if n > 0 => (name.to_string(), n),
                        _ => {
                            f.warnings.push(format!(
                                "gaspard: ignoring exclude-sites entry '{s}': expected FILE or FILE:LINE"
                            ));
                            continue;
                        }
                    },
                    None => (s.clone(), 0),
                };
                if file.is_empty() || file.len() >= 256 || file.contains('\0') {
                    f.warnings.push(format!(
                        "gaspard: ignoring exclude-sites entry '{s}': the file name must have 1 to 255 bytes"
                    ));
                    continue;
                }
                f.sites.push((file, line));
            }
        }
        f.text = text.join(" ");
        for p in f.exclude.iter().chain(f.include.iter().flatten()) {
            let system = p.starts_with("GASP_") || p.starts_with("GASPARD_");
            if system && !kinds::all_kinds().any(|k| matches(p, k.name)) {
                f.warnings.push(format!(
                    "gaspard: filter '{p}' names no event kind (see gaspard's headers for the names)"
                ));
            }
        }
        f
    }

    fn active(&self) -> bool {
        !self.exclude.is_empty() || self.include.is_some() || !self.sites.is_empty()
    }

    /// Whether events of this name are left out.
    pub(crate) fn skips(&self, name: &str) -> bool {
        if let Some(inc) = &self.include {
            if !inc.iter().any(|p| matches(p, name)) {
                return true;
            }
        }
        self.exclude.iter().any(|p| matches(p, name))
    }
}

static FILTERS: OnceLock<Filters> = OnceLock::new();

/// Reads the filters from the environment and hands them to the hot path.
/// Returns the warnings to print.
pub(crate) fn install() -> Vec<String> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let f = FILTERS.get_or_init(|| {
        Filters::parse(
            var("GASPARD_EXCLUDE").as_deref(),
            var("GASPARD_INCLUDE").as_deref(),
            var("GASPARD_EXCLUDE_SITES").as_deref(),
        )
    });
    if !f.active() {
        return f.warnings.clone();
    }
    let mut warnings = f.warnings.clone();
    for k in kinds::all_kinds() {
        // gaspard's own events (256..511) are always kept.
        if !(256..512).contains(&k.id) && f.skips(k.name) {
            // SAFETY: sets a bit in a static bitmap; called before recording starts.
            unsafe { gaspard_filter_kind(u32::from(k.id)) };
        }
    }
    for (file, line) in &f.sites {
        let c = std::ffi::CString::new(file.as_str()).expect("checked: no NUL");
        // SAFETY: `c` is a NUL-terminated string the C side copies.
        if unsafe { gaspard_filter_site(c.as_ptr(), *line) } == 0 {
            warnings.push(format!(
                "gaspard: ignoring exclude-sites entry '{file}': at most 64 entries"
            ));
        }
    }
    // SAFETY: sets a flag read by the hot path.
    unsafe { gaspard_filter_enable(1) };
    warnings
}

/// A user event was created: leaves it out when its name is filtered.
pub(crate) fn user_created(name: &str, base: u32, id: u32) {
    if FILTERS.get().is_some_and(|f| f.active() && f.skips(name)) {
        // SAFETY: sets a bit in a static bitmap, atomically.
        unsafe { gaspard_filter_user(base, id - base) };
    }
}

/// The manifest's note on what the filters left out, if anything.
pub(crate) fn note(filtered: u64) -> Option<String> {
    let f = FILTERS.get()?;
    (filtered > 0).then(|| {
        format!(
            "{filtered} events were left out by the filters ({}): they are not in the trace",
            f.text
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_prefixes_and_include() {
        let f = Filters::parse(Some("GASP_C_MALLOC, GASP_SHMEM_LONG_*,iter"), None, None);
        assert!(f.skips("GASP_C_MALLOC"));
        assert!(f.skips("GASP_SHMEM_LONG_ATOMIC_FETCH_ADD"));
        assert!(f.skips("iter"));
        assert!(!f.skips("GASP_C_FREE"));
        assert!(!f.skips("iteration"));
        assert!(f.warnings.is_empty(), "{:?}", f.warnings);
        let f = Filters::parse(None, Some("GASP_UPC_*"), None);
        assert!(!f.skips("GASP_UPC_GET"));
        assert!(f.skips("GASP_C_FUNC"));
        assert!(f.skips("my_region"));
    }

    #[test]
    fn sites_and_bad_settings() {
        let f = Filters::parse(
            Some("GASP_NO_SUCH"),
            None,
            Some("heat.c, sort.c:42, x.c:zero"),
        );
        assert_eq!(f.sites, vec![("heat.c".into(), 0), ("sort.c".into(), 42)]);
        assert_eq!(f.warnings.len(), 2, "{:?}", f.warnings);
        assert!(f.warnings[0].contains("x.c:zero"));
        assert!(f.warnings[1].contains("GASP_NO_SUCH"));
        assert!(f.text.contains("GASPARD_EXCLUDE_SITES=heat.c"));
    }
}
