# SPDX-License-Identifier: Apache-2.0
"""The one-command performance report (benchmarks/report/run_report.py), one module per job:
common (running commands, mpirun lines, number and table formatting), parse (what the programs print),
runner (the measurements), callgrind (instruction profiles), plots, targets (the speed targets' verdicts)
and write (results.csv and report.md)."""
