//! Input-rate patterns: the paper's Burst and Gradual (Fig. 14) and a few simpler shapes, as a
//! function of time, for the simulator's e2e experiment and for the live planner's generator
//! (`clasp run --pattern`).
//!
//! Why one module: the live run and the simulator must mean the same thing by "gradual" and
//! "burst", or the comparison between them says nothing. The paper's patterns are stages of
//! 5–10 s (seeded) at fractions of the maximum rate; [`stages`] builds them exactly as the e2e
//! experiment has always done, and [`RatePattern::rate_at`] stretches the same stages over any
//! duration, so a 30 s live run sees the same shape as a 200 s simulated one.
//!
//! Seeded and pure: the same (pattern, seed) gives the same rate at the same time, everywhere.
//! Only [`RatePattern::parse`] touches the file system (to read a `t_s,rate_per_s` file).

use clasp_protocol::rng::SimRng;

/// Fastest input rate accepted (records per second), in a pattern file as for `--rate` and
/// `--peak-rate`: far beyond what one ingress produces.
pub const MAX_RATE_PER_S: f64 = 1e9;
/// Stage length bounds of the paper's patterns (µs), as the paper's 5–10 s.
pub const STAGE_MIN_US: f64 = 5_000_000.0;
pub const STAGE_MAX_US: f64 = 10_000_000.0;
/// Plateaus of the `steps` pattern.
pub const STEPS_PLATEAUS: usize = 4;
/// The `steps` plateaus lie in [this, 1] × the peak.
pub const STEPS_MIN_FRACTION: f64 = 0.2;

/// The paper's two e2e patterns (Fig. 14).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PaperPattern {
    Burst,
    Gradual,
}

impl PaperPattern {
    pub fn name(self) -> &'static str {
        match self {
            PaperPattern::Burst => "burst",
            PaperPattern::Gradual => "gradual",
        }
    }
}

/// Stages as (fraction of the maximum rate, duration µs). Gradual: 10%→100%→10% in 10% steps;
/// Burst: alternating low (10–30%) and high (70–100%) stages until the same volume.
pub fn stages(pattern: PaperPattern, seed: u64) -> Vec<(f64, f64)> {
    let mut rng = SimRng::new(seed ^ 0x005E_ED0F_5EED);
    let dur = |rng: &mut SimRng| STAGE_MIN_US + rng.uniform() * (STAGE_MAX_US - STAGE_MIN_US);
    let mut gradual = Vec::new();
    for i in (1..=10).chain((1..10).rev()) {
        gradual.push((i as f64 / 10.0, dur(&mut rng)));
    }
    if pattern == PaperPattern::Gradual {
        return gradual;
    }
    let volume: f64 = gradual.iter().map(|(r, d)| r * d).sum();
    let mut burst = Vec::new();
    let mut acc = 0.0;
    let mut high = false;
    while acc < volume {
        let r = if high {
            0.7 + 0.3 * rng.uniform()
        } else {
            0.1 + 0.2 * rng.uniform()
        };
        let mut d = dur(&mut rng);
        if acc + r * d > volume {
            d = (volume - acc) / r;
        }
        acc += r * d;
        burst.push((r, d));
        high = !high;
    }
    burst
}

/// An input-rate pattern over a run of a given duration.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum RatePattern {
    /// The peak rate throughout.
    Constant,
    /// [`STEPS_PLATEAUS`] equal plateaus at seeded fractions of the peak.
    Steps,
    /// The paper's Gradual: 10 %, 20 %, …, 100 %, …, 10 % of the peak, stages of seeded lengths
    /// stretched over the duration (a ramp up, then down). `clasp run`'s default.
    #[default]
    Gradual,
    /// The paper's Burst: alternating low (10–30 %) and high (70–100 %) stages, seeded.
    Burst,
    /// `(t_s, rate_per_s)` points from a file: the rate holds from each point until the next
    /// (the first point's rate before it, the last's after it). Absolute rates: the peak is
    /// ignored.
    File(Vec<(f64, f64)>),
}

impl RatePattern {
    /// The built-in names.
    pub const NAMES: [&'static str; 4] = ["constant", "steps", "gradual", "burst"];

    /// A built-in name, or a path to a file of `t_s,rate_per_s` lines (see [`parse_points`]).
    pub fn parse(s: &str) -> Result<RatePattern, String> {
        match s {
            "constant" => return Ok(RatePattern::Constant),
            "steps" => return Ok(RatePattern::Steps),
            "gradual" => return Ok(RatePattern::Gradual),
            "burst" => return Ok(RatePattern::Burst),
            _ => {}
        }
        let path = std::path::Path::new(s);
        if !path.is_file() {
            let what = if path.is_dir() {
                "a directory"
            } else if path.exists() {
                "not a regular file"
            } else {
                "no such file"
            };
            return Err(format!(
                "unknown pattern {s:?}: expected {} or a file of `t_s,rate_per_s` lines ({what})",
                RatePattern::NAMES.join(", ")
            ));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("pattern file {}: {e}", path.display()))?;
        parse_points(&text, &path.display().to_string()).map(RatePattern::File)
    }

    /// A short name for logs and summaries (`file` for a file pattern).
    pub fn name(&self) -> &'static str {
        match self {
            RatePattern::Constant => "constant",
            RatePattern::Steps => "steps",
            RatePattern::Gradual => "gradual",
            RatePattern::Burst => "burst",
            RatePattern::File(_) => "file",
        }
    }

    /// The input rate (per second) at `t_s` seconds into a run of `duration_s` seconds whose
    /// highest built-in rate is `peak_per_s`. Times outside `[0, duration_s)` are clamped to it;
    /// a non-positive or non-finite duration is one instant (the shape's start); a negative or
    /// non-finite peak is 0. Never negative, never NaN.
    pub fn rate_at(&self, t_s: f64, duration_s: f64, peak_per_s: f64, seed: u64) -> f64 {
        let peak = if peak_per_s.is_finite() {
            peak_per_s.max(0.0)
        } else {
            0.0
        };
        let frac = if duration_s.is_finite() && duration_s > 0.0 && t_s.is_finite() {
            (t_s / duration_s).clamp(0.0, 1.0)
        } else {
            0.0
        };
        let rate = match self {
            RatePattern::Constant => peak,
            RatePattern::Steps => {
                let mut rng = SimRng::new(seed ^ 0x57E9_5000);
                let levels: Vec<f64> = (0..STEPS_PLATEAUS)
                    .map(|_| STEPS_MIN_FRACTION + (1.0 - STEPS_MIN_FRACTION) * rng.uniform())
                    .collect();
                let i = ((frac * STEPS_PLATEAUS as f64) as usize).min(STEPS_PLATEAUS - 1);
                levels[i] * peak
            }
            RatePattern::Gradual => stretched(&stages(PaperPattern::Gradual, seed), frac) * peak,
            RatePattern::Burst => stretched(&stages(PaperPattern::Burst, seed), frac) * peak,
            RatePattern::File(points) => {
                let t = if t_s.is_finite() { t_s } else { 0.0 };
                let idx = points.partition_point(|&(pt, _)| pt <= t);
                points
                    .get(idx.saturating_sub(1))
                    .or(points.first())
                    .map_or(0.0, |p| p.1)
            }
        };
        if rate.is_finite() { rate.max(0.0) } else { 0.0 }
    }
}

/// The stage's rate fraction at `frac` ∈ [0, 1] of the stages' total length.
fn stretched(stages: &[(f64, f64)], frac: f64) -> f64 {
    let total: f64 = stages.iter().map(|s| s.1).sum();
    let mut t = frac * total;
    for &(r, d) in stages {
        if t < d {
            return r;
        }
        t -= d;
    }
    stages.last().map_or(0.0, |s| s.0)
}

/// Parses `t_s,rate_per_s` lines: blank lines, `#` comments and a `t_s,rate_per_s` header are
/// skipped; times must be finite, non-negative and strictly increasing, rates finite and
/// non-negative; at least one point. Errors name `origin` (the file) and the line.
pub fn parse_points(text: &str, origin: &str) -> Result<Vec<(f64, f64)>, String> {
    let mut points: Vec<(f64, f64)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if points.is_empty() && line.replace(' ', "") == "t_s,rate_per_s" {
            continue;
        }
        let err = |why: String| format!("{origin}:{line_no}: {why} (in {line:?})");
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let [t, r] = fields[..] else {
            return Err(err(format!(
                "expected two comma-separated numbers `t_s,rate_per_s`, got {} field(s)",
                fields.len()
            )));
        };
        let num = |what: &str, s: &str| -> Result<f64, String> {
            match s.parse::<f64>() {
                Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
                Ok(v) => Err(err(format!(
                    "{what} must be a finite non-negative number, got {v}"
                ))),
                Err(_) => Err(err(format!("{what} is not a number: {s:?}"))),
            }
        };
        let (t, r) = (num("t_s", t)?, num("rate_per_s", r)?);
        if r > MAX_RATE_PER_S {
            return Err(err(format!(
                "rate_per_s must be at most {MAX_RATE_PER_S:e} records per second, got {r}"
            )));
        }
        if let Some(&(prev, _)) = points.last() {
            if t <= prev {
                return Err(err(format!(
                    "t_s must increase from line to line ({t} after {prev})"
                )));
            }
        }
        points.push((t, r));
    }
    if points.is_empty() {
        return Err(format!("{origin}: no `t_s,rate_per_s` points"));
    }
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_unknown_names_say_what_is_expected() {
        for n in RatePattern::NAMES {
            let p = RatePattern::parse(n).expect("built-in");
            assert_eq!(p.name(), n);
        }
        assert_eq!(RatePattern::default(), RatePattern::Gradual);
        let e = RatePattern::parse("/no/such/pattern.csv").expect_err("missing file");
        assert!(
            e.contains("/no/such/pattern.csv") && e.contains("gradual"),
            "{e}"
        );
    }

    #[test]
    fn constant_is_the_peak_and_bad_inputs_do_not_panic() {
        let p = RatePattern::Constant;
        assert_eq!(p.rate_at(3.0, 10.0, 500.0, 1), 500.0);
        assert_eq!(p.rate_at(3.0, 10.0, -5.0, 1), 0.0);
        assert_eq!(p.rate_at(3.0, 10.0, f64::NAN, 1), 0.0);
        for pat in [
            RatePattern::Steps,
            RatePattern::Gradual,
            RatePattern::Burst,
            RatePattern::File(vec![(0.0, 5.0)]),
        ] {
            for (t, d) in [(f64::NAN, 10.0), (-1.0, 10.0), (5.0, 0.0), (5.0, f64::NAN)] {
                let r = pat.rate_at(t, d, 100.0, 1);
                assert!(r.is_finite() && r >= 0.0, "{pat:?} {t} {d}: {r}");
            }
        }
    }

    #[test]
    fn gradual_ramps_up_then_down() {
        let p = RatePattern::Gradual;
        let rates: Vec<f64> = (0..190)
            .map(|i| p.rate_at(i as f64 * 0.1, 19.0, 1000.0, 7))
            .collect();
        let peak_at = rates
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(i, _)| i)
            .expect("non-empty");
        assert!((rates[peak_at] - 1000.0).abs() < 1e-9);
        assert!(rates[..=peak_at].windows(2).all(|w| w[1] >= w[0]));
        assert!(rates[peak_at..].windows(2).all(|w| w[1] <= w[0]));
        assert!((rates[0] - 100.0).abs() < 1e-9 && (rates[189] - 100.0).abs() < 1e-9);
    }

    #[test]
    fn burst_follows_the_papers_stages_and_is_seeded() {
        let st = stages(PaperPattern::Burst, 3);
        let total_s: f64 = st.iter().map(|s| s.1).sum::<f64>() / 1e6;
        // On the stages' own time scale, rate_at is the stage's fraction of the peak.
        let mut t_us = 0.0;
        for &(r, d) in &st {
            let mid_s = (t_us + d / 2.0) / 1e6;
            assert!(
                (RatePattern::Burst.rate_at(mid_s, total_s, 100.0, 3) - 100.0 * r).abs() < 1e-9
            );
            t_us += d;
        }
        let a: Vec<f64> = (0..50)
            .map(|i| RatePattern::Burst.rate_at(i as f64, 50.0, 1.0, 3))
            .collect();
        let b: Vec<f64> = (0..50)
            .map(|i| RatePattern::Burst.rate_at(i as f64, 50.0, 1.0, 4))
            .collect();
        assert_ne!(a, b, "another seed, another burst");
        assert!(a.iter().any(|&r| r >= 0.7) && a.iter().any(|&r| r <= 0.3));
    }

    #[test]
    fn steps_are_a_few_seeded_plateaus_within_the_peak() {
        let p = RatePattern::Steps;
        let r: Vec<f64> = (0..40)
            .map(|i| p.rate_at(i as f64, 40.0, 10.0, 9))
            .collect();
        let mut distinct = r.clone();
        distinct.dedup();
        assert!(
            distinct.len() <= STEPS_PLATEAUS && distinct.len() >= 2,
            "{distinct:?}"
        );
        assert!(r.iter().all(|&x| (2.0..=10.0).contains(&x)));
        assert_eq!(
            r,
            (0..40)
                .map(|i| p.rate_at(i as f64, 40.0, 10.0, 9))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn file_points_hold_until_the_next() {
        let pts = parse_points(
            "# a comment\nt_s,rate_per_s\n0,100\n\n2.5, 300\n10,0\n",
            "f.csv",
        )
        .expect("valid");
        assert_eq!(pts, vec![(0.0, 100.0), (2.5, 300.0), (10.0, 0.0)]);
        let p = RatePattern::File(pts);
        assert_eq!(p.rate_at(0.0, 20.0, 1.0, 1), 100.0);
        assert_eq!(p.rate_at(2.4, 20.0, 1.0, 1), 100.0);
        assert_eq!(p.rate_at(2.5, 20.0, 1.0, 1), 300.0);
        assert_eq!(p.rate_at(15.0, 20.0, 1.0, 1), 0.0);
        let late = RatePattern::File(vec![(1.0, 50.0)]);
        assert_eq!(late.rate_at(0.0, 20.0, 1.0, 1), 50.0);
    }

    #[test]
    fn malformed_files_name_the_file_and_line() {
        let cases = [
            ("0,1\n1\n", "f.csv:2:", "two comma-separated"),
            ("0,1\n1,x\n", "f.csv:2:", "not a number"),
            ("0,1\n1,-3\n", "f.csv:2:", "non-negative"),
            ("0,1\n1,1e300\n", "f.csv:2:", "at most 1e9"),
            ("0,1\n# c\n0,2\n", "f.csv:3:", "increase"),
            ("0,1,2\n", "f.csv:1:", "3 field"),
            ("inf,1\n", "f.csv:1:", "finite"),
            ("# only a comment\n", "f.csv", "no `t_s,rate_per_s` points"),
        ];
        for (text, at, why) in cases {
            let e = parse_points(text, "f.csv").expect_err(text);
            assert!(e.starts_with(at) && e.contains(why), "{text:?}: {e}");
        }
    }

    #[test]
    fn parse_reads_a_file() {
        let dir = std::env::temp_dir().join(format!("clasp-pattern-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let good = dir.join("good.csv");
        std::fs::write(&good, "0,10\n5,20\n").expect("write");
        let p = RatePattern::parse(good.to_str().expect("utf-8")).expect("valid file");
        assert_eq!(p, RatePattern::File(vec![(0.0, 10.0), (5.0, 20.0)]));
        let bad = dir.join("bad.csv");
        std::fs::write(&bad, "0,10\n5;20\n").expect("write");
        let e = RatePattern::parse(bad.to_str().expect("utf-8")).expect_err("malformed");
        assert!(e.contains("bad.csv:2:"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
