use super::*;
use std::sync::Mutex;

#[test]
fn an_nvidia_smi_line_is_read_field_by_field() {
    let r =
        nvidia::parse_line("1980, 2619, 1980, 41, 312.55, P0, 99, 0x0000000000000004\n").unwrap();
    assert_eq!(r.sm_clock_mhz, Some(1980.0));
    assert_eq!(r.mem_clock_mhz, Some(2619.0));
    assert_eq!(r.temperature_c, Some(41.0));
    assert_eq!(r.power_w, Some(312.55));
    assert_eq!(r.pstate.as_deref(), Some("P0"));
    assert_eq!(r.utilization_pct, Some(99.0));
    assert_eq!(r.slowdowns, ["sw_power_cap"]);
    // Idle (0x1) and application clocks (0x2) hold nothing down; N/A fields are absent.
    let idle = nvidia::parse_line("345, 2619, 1980, 33, [N/A], P8, 0, 0x0000000000000003").unwrap();
    assert!(idle.slowdowns.is_empty());
    assert_eq!(idle.power_w, None);
    let thermal = nvidia::parse_line("1400, 2619, 1980, 88, 700, P0, 100, 0x60").unwrap();
    assert_eq!(
        thermal.slowdowns,
        ["sw_thermal_slowdown", "hw_thermal_slowdown"]
    );
    assert!(nvidia::parse_line("No devices were found").is_err());
}

#[test]
fn amdgpu_sysfs_files_are_read_from_the_render_nodes_device() {
    let d = tempfile::tempdir().unwrap();
    let dev = d.path();
    std::fs::write(
        dev.join("pp_dpm_sclk"),
        "0: 500Mhz\n1: 1800Mhz *\n2: 2100Mhz\n",
    )
    .unwrap();
    std::fs::write(dev.join("pp_dpm_mclk"), "0: 900Mhz\n1: 1300Mhz *\n").unwrap();
    std::fs::write(dev.join("gpu_busy_percent"), "87\n").unwrap();
    std::fs::write(dev.join("power_dpm_force_performance_level"), "auto\n").unwrap();
    std::fs::create_dir_all(dev.join("hwmon/hwmon3")).unwrap();
    std::fs::write(dev.join("hwmon/hwmon3/temp1_input"), "61000\n").unwrap();
    std::fs::write(dev.join("hwmon/hwmon3/power1_average"), "412000000\n").unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let r = rt.block_on(AmdSysfs::at(dev.to_path_buf()).read()).unwrap();
    assert_eq!(r.sm_clock_mhz, Some(1800.0));
    assert_eq!(r.max_sm_clock_mhz, Some(2100.0));
    assert_eq!(r.mem_clock_mhz, Some(1300.0));
    assert_eq!(r.temperature_c, Some(61.0));
    assert_eq!(r.power_w, Some(412.0));
    assert_eq!(r.utilization_pct, Some(87.0));
    assert_eq!(r.pstate.as_deref(), Some("performance level auto"));
    let none = rt.block_on(AmdSysfs::at(dev.join("nothing")).read());
    assert!(none.unwrap_err().contains("pp_dpm_sclk"));
}

fn reading(sm: f64, util: f64, slow: &[&str]) -> Result<DeviceReading, String> {
    Ok(DeviceReading {
        sm_clock_mhz: Some(sm),
        temperature_c: Some(40.0 + sm / 100.0),
        utilization_pct: Some(util),
        slowdowns: slow.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    })
}

#[test]
fn a_window_warns_when_busy_clocks_move_or_something_holds_them_down() {
    // Idle readings at 345 MHz before and after do not count; busy ones 1980 then 1700.
    let w = summarize(
        "test",
        &[
            reading(345.0, 0.0, &[]),
            reading(1980.0, 100.0, &[]),
            reading(1700.0, 100.0, &["sw_thermal_slowdown"]),
            Err("nvidia-smi did not answer in 10 s".into()),
            reading(345.0, 0.0, &[]),
        ],
    );
    assert_eq!(w.samples, 4);
    assert_eq!(w.busy_sm_clock_mhz, Some((1700.0, 1980.0)));
    assert_eq!(w.start.unwrap().sm_clock_mhz, Some(345.0));
    assert_eq!(w.max_temperature_c, Some(59.8));
    assert_eq!(w.slowdowns, ["sw_thermal_slowdown"]);
    assert_eq!(w.warnings.len(), 3, "{:?}", w.warnings);
    assert!(w.warnings[1].contains("from 1700 to 1980 MHz"));
    assert!(w.warnings[2].contains("1 of 5 readings failed"));
    // Steady clocks: no warning.
    let calm = summarize(
        "t",
        &[reading(1980.0, 90.0, &[]), reading(1965.0, 95.0, &[])],
    );
    assert!(calm.warnings.is_empty(), "{:?}", calm.warnings);
    // Nothing read: why.
    let none = summarize("t", &[Err("nvidia-smi: No such file".into())]);
    assert_eq!(
        none.unavailable.as_deref(),
        Some("nvidia-smi: No such file")
    );
    assert_eq!(none.samples, 0);
}

struct Counting(Mutex<u32>);

#[async_trait::async_trait]
impl DeviceReader for Counting {
    fn source(&self) -> String {
        "counting".into()
    }
    async fn read(&self) -> Result<DeviceReading, String> {
        let mut n = self.0.lock().unwrap();
        *n += 1;
        reading(1000.0 + f64::from(*n), 100.0, &[])
    }
}

#[tokio::test(start_paused = true)]
async fn a_watch_reads_at_the_start_every_interval_and_at_the_end() {
    let w = watch(Arc::new(Counting(Mutex::new(0))), Duration::from_secs(2));
    tokio::time::sleep(Duration::from_millis(5100)).await;
    let window = w.finish().await;
    // At 0 s, 2 s and 4 s, then one more when finished.
    assert_eq!(window.samples, 4);
    assert_eq!(window.start.unwrap().sm_clock_mhz, Some(1001.0));
    assert_eq!(window.end.unwrap().sm_clock_mhz, Some(1004.0));
    assert_eq!(window.source, "counting");
}

#[test]
fn only_real_gpus_have_a_reader() {
    let fake = crate::gpus::parse_gpus("fake:1").unwrap();
    assert!(reader_for(&fake[0]).is_none());
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("nvidia3"), "").unwrap();
    let gpus = crate::gpus::parse_gpus_at("nvidia:3", d.path()).unwrap();
    assert_eq!(reader_for(&gpus[0]).unwrap().source(), "nvidia-smi -i 3");
}
