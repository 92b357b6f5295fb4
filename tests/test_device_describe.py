"""What a device reads about itself (fedbench.profiling.describe), on recorded trees."""

from __future__ import annotations

from pathlib import Path

from fedbench.profiling.describe import describe

# A Snapdragon 855-like phone: 4 little A55 at 1.79 GHz, 3 A76 at 2.42, 1 A76 at 2.84.
PARTS = ["0x805"] * 4 + ["0x804"] * 4
TOPS = [1785600] * 4 + [2419200] * 3 + [2841600]


def _phone(root: Path) -> Path:
    blocks = [
        f"processor\t: {i}\nBogoMIPS\t: 38.40\nCPU implementer\t: 0x51\nCPU part\t: {part}\n"
        for i, part in enumerate(PARTS)
    ]
    (root / "proc").mkdir(parents=True)
    (root / "proc/cpuinfo").write_text("\n".join(blocks) + "\nHardware\t: Qualcomm SM8150\n")
    (root / "proc/meminfo").write_text("MemTotal: 5800000 kB\nMemAvailable: 2900000 kB\n")
    cpu = root / "sys/devices/system/cpu"
    cpu.mkdir(parents=True)
    (cpu / "online").write_text("0-7\n")
    for i, top in enumerate(TOPS):
        freq = cpu / f"cpu{i}/cpufreq"
        freq.mkdir(parents=True)
        (freq / "cpuinfo_max_freq").write_text(f"{top}\n")
        (freq / "scaling_available_frequencies").write_text(f"300000 1209600 {top}\n")
    return root


def test_big_little_clusters_with_their_arch_and_clocks(tmp_path: Path) -> None:
    d = describe(_phone(tmp_path))
    assert [(c.arch, c.cores, c.max_freq_ghz) for c in d.clusters] == [
        ("a55", 4, 1.786),
        ("a76", 3, 2.419),
        ("a76", 1, 2.842),
    ]
    assert d.clusters[0].dvfs_ghz == (0.3, 1.2096, 1.7856)
    assert d.total_cores == 8
    assert (d.total_mb, d.available_mb) == (5664, 2832)
    assert "4x a55 @ 1.79 GHz + 3x a76 @ 2.42 GHz + 1x a76 @ 2.84 GHz" in d.summary()


def test_a_core_without_cpufreq_uses_cpuinfo_mhz(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text(
        "processor\t: 0\nmodel name\t: AMD EPYC\ncpu MHz\t\t: 2596.120\n\n"
        "processor\t: 1\nmodel name\t: AMD EPYC\ncpu MHz\t\t: 2596.120\n"
    )
    (tmp_path / "proc/meminfo").write_text("MemTotal: 2048000 kB\nMemFree: 1024000 kB\n")
    d = describe(tmp_path)
    (c,) = d.clusters
    assert (c.cores, c.arch, c.model, c.max_freq_ghz) == (2, None, "AMD EPYC", 2.596)
    assert d.available_mb == 1000


def test_this_host_describes_itself() -> None:
    d = describe()
    assert d.total_cores >= 1 and d.total_mb > 0
    assert d.summary().startswith("auto: ")
