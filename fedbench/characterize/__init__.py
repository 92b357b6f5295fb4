"""The characterisation suite: papers 000-002's measurements, reproducible on any device.

    python -m fedbench.characterize study=batch_sweep device=jetson_tx2
    python -m fedbench.characterize study=all device=meizu_16t
    python -m fedbench.characterize study=op_breakdown device=this models=small_cnn batch_size=8

Studies (fedbench/conf/characterize/<name>.yaml, one module each under studies/):
batch_sweep (paper 000 Figs 6, 8-9), cpu_config (paper 001's CPU table),
width_depth (paper 002 Tables 4-5, Figs 6, 8, 10), op_breakdown (papers
001/002: time per phase and operator class), background (paper 002 Fig 16)
and daily_accuracy (paper 000 Fig 10, trains for real). On an emulated
profile every figure comes from the measured workload and the emulator;
on `device=this` from real timed steps under the probe (device.py).
Each study writes <study>.csv, PNG figures and meta.json into its folder,
by default outputs/characterize/<study>/<device>/.
"""

from __future__ import annotations

from fedbench.characterize.cli import run_study
from fedbench.characterize.registry import study_names

__all__ = ["run_study", "study_names"]
