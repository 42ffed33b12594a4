//! What the figures were measured on, as every harness and report prints it.

/// The CPU's model name from `/proc/cpuinfo` (`"unknown CPU"` where it has none).
pub fn cpu_model() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    model_in(&cpuinfo)
}

fn model_in(cpuinfo: &str) -> String {
    cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name").map(|r| {
                r.trim_start_matches([' ', '\t', ':'])
                    .trim_end()
                    .to_string()
            })
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// A one-line description of this machine: CPU model, cores, kernel.
pub fn description() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cores = cpuinfo
        .lines()
        .filter(|l| l.starts_with("processor"))
        .count()
        .max(1);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let virt = if cpuinfo.contains(" hypervisor") {
        ", virtual machine"
    } else {
        ""
    };
    format!(
        "{}, {cores} cores{virt}, Linux {}",
        model_in(&cpuinfo),
        kernel.trim()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_is_the_model_name_line() {
        let info = "processor\t: 0\nmodel name\t: AMD EPYC 7R13 \nflags\t: fpu\n";
        assert_eq!(model_in(info), "AMD EPYC 7R13");
        assert_eq!(model_in("processor\t: 0\n"), "unknown CPU");
    }
}
