//! The self-contained HTML report: the run's facts, every section's
//! tables, figures and unsafe variants, and the printed text.

use super::{Figure, Section, Table};
use machine::Error;

/// Facts about the run, for the report's header.
pub struct Meta {
    pub version: String,
    /// `git rev-parse HEAD` where the binary runs in a checkout.
    pub commit: Option<String>,
    /// The cost profile of each architecture (name and description).
    pub profiles: Vec<(String, String)>,
    pub command: String,
}

impl Meta {
    /// This build and checkout, for a demo of `iterations` iterations.
    pub fn current(iterations: u64) -> Meta {
        use machine::scenario::Arch;
        let commit = std::process::Command::new("git")
            .args(["rev-parse", "HEAD"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|c| !c.is_empty());
        Meta {
            version: env!("CARGO_PKG_VERSION").to_string(),
            commit,
            profiles: [Arch::X86, Arch::Arm64, Arch::Riscv]
                .into_iter()
                .map(|a| {
                    let p = machine::CostProfile::default_for(a);
                    (format!("{} ({})", p.name, a.name()), p.description)
                })
                .collect(),
            command: format!("tlblab demo --iterations {iterations}"),
        }
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn html_table(t: &Table) -> String {
    let mut h = format!("<table><caption>{}</caption><thead><tr>", esc(&t.caption));
    for c in &t.head {
        h.push_str(&format!("<th>{}</th>", esc(c)));
    }
    h.push_str("</tr></thead><tbody>");
    for r in &t.rows {
        h.push_str("<tr>");
        for c in r {
            h.push_str(&format!("<td>{}</td>", esc(c)));
        }
        h.push_str("</tr>");
    }
    h.push_str("</tbody></table>");
    h
}

fn html_meta(m: &Meta, sections: &[Section]) -> String {
    let mut rows = vec![
        ("version".to_string(), m.version.clone()),
        (
            "git commit".to_string(),
            m.commit
                .clone()
                .unwrap_or_else(|| "unknown (not run in a git checkout)".into()),
        ),
    ];
    for (name, about) in &m.profiles {
        rows.push(("cost profile".into(), format!("{name}: {about}")));
    }
    let mut seeds: Vec<String> = sections
        .iter()
        .flat_map(|s| s.scenarios.iter().map(|(n, seed)| format!("{n}: {seed}")))
        .collect();
    seeds.dedup();
    rows.push(("seed (scenario: seed)".into(), seeds.join(", ")));
    rows.push(("command to reproduce".into(), m.command.clone()));
    let mut h = String::from("<section id=\"run\"><h2>This run</h2><table class=\"meta\"><tbody>");
    for (k, v) in rows {
        h.push_str(&format!(
            "<tr><th>{}</th><td>{}</td></tr>",
            esc(&k),
            esc(&v)
        ));
    }
    h.push_str("</tbody></table></section>");
    h
}

/// A link from the report directory to `docs/{page}.md` of the checkout.
fn doc_link(dir: &str, page: &str) -> String {
    let target = std::path::Path::new("docs").join(format!("{page}.md"));
    let rel = std::fs::canonicalize(dir)
        .ok()
        .zip(std::fs::canonicalize(&target).ok())
        .map(|(from, to)| {
            let common = from
                .components()
                .zip(to.components())
                .take_while(|(a, b)| a == b)
                .count();
            let ups = from.components().count() - common;
            let mut p = "../".repeat(ups);
            let rest: Vec<String> = to
                .components()
                .skip(common)
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            p.push_str(&rest.join("/"));
            p
        });
    rel.unwrap_or_else(|| format!("docs/{page}.md"))
}

fn html_section(dir: &str, s: &Section, figs: &[Figure]) -> String {
    let mut h = format!("<section id=\"{}\"><h2>{}</h2>", s.id, esc(&s.title));
    if let Some(page) = s.doc {
        h.push_str(&format!(
            "<p class=\"doc\">What is modelled and how the figures compare: <a href=\"{}\">docs/{page}.md</a></p>",
            esc(&doc_link(dir, page))
        ));
    }
    for t in &s.tables {
        h.push_str(&html_table(t));
    }
    for f in figs.iter().filter(|f| f.section == s.id) {
        h.push_str(&format!(
            "<figure>{}<figcaption>{}</figcaption></figure>",
            f.svg,
            esc(&f.caption)
        ));
    }
    for u in &s.unsafe_variants {
        h.push_str(&format!(
            "<details class=\"unsafe\"><summary>{}: {}</summary><ol>",
            esc(&u.variant),
            esc(&u.verdict)
        ));
        for step in &u.steps {
            h.push_str(&format!("<li>{}</li>", esc(step)));
        }
        h.push_str("</ol></details>");
    }
    if !s.scenarios.is_empty() {
        let names: Vec<String> = s
            .scenarios
            .iter()
            .map(|(n, seed)| format!("scenarios/{n}.toml (seed {seed})"))
            .collect();
        h.push_str(&format!(
            "<p class=\"scenarios\">Scenarios: {}</p>",
            esc(&names.join(", "))
        ));
    }
    h.push_str(&format!(
        "<details class=\"text\"><summary>as printed by tlblab demo</summary><pre>{}</pre></details></section>",
        esc(&s.text)
    ));
    h
}

/// Write a self-contained HTML report; returns its path.
pub fn write_report(
    dir: &str,
    meta: &Meta,
    sections: &[Section],
    figs: &[Figure],
) -> Result<String, Error> {
    std::fs::create_dir_all(dir).map_err(|e| Error::Write(format!("{dir}: {e}")))?;
    let mut html = String::from(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"/><title>tlblab report</title>\
         <style>body{font-family:sans-serif;max-width:1100px;margin:2em auto}pre{background:#f6f6f6;padding:1em;overflow-x:auto}\
         table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}\
         caption{text-align:left;font-style:italic;padding:.3em 0}figure{margin:1.5em 0}details{margin:.5em 0}\
         details.unsafe summary{color:#a00}li{font-family:monospace;font-size:90%}</style></head><body><h1>tlblab report</h1>",
    );
    html.push_str(&html_meta(meta, sections));
    html.push_str("<nav><ul>");
    for s in sections {
        html.push_str(&format!(
            "<li><a href=\"#{}\">{}</a></li>",
            s.id,
            esc(&s.title)
        ));
    }
    html.push_str("</ul></nav>");
    for s in sections {
        html.push_str(&html_section(dir, s, figs));
    }
    html.push_str("</body></html>\n");
    let path = format!("{dir}/index.html");
    std::fs::write(&path, html).map_err(|e| Error::Write(format!("{path}: {e}")))?;
    Ok(path)
}
