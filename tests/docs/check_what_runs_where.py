#!/usr/bin/env python3
"""Fails when pmpi/README.md's "What runs where" table no longer covers what
the PMPI layer intercepts, or a row lacks a device column.

usage: check_what_runs_where.py PMPI_README CALLS_DEF REASONS_DEF TOP_README LIBACCL_PMPI NM

Checks, each failure naming what is wrong:
* the table's header has the calls column and the four device columns, in
  order, and every row has all five cells, none of the four empty;
* every MPI call of pmpi/src/calls.def, and every C entry point the library
  exports (`nm -D`: MPI_Wait, MPI_Init, ...), is named in the calls column.
  A call counts only under its exact C name as a whole word: `MPI_Ibcast`
  must be written out (neither "MPI_I* forms" nor `MPI_Bcast` covers it), and
  Fortran names (`mpi_bcast_`) do not count for the C name;
* every name in the calls column is intercepted (in calls.def or exported),
  and the library has the Fortran entry point `mpi_<name>_` the section
  promises for each, except MPI_Request_c2f/f2c (C-only conversions);
* no function the "Never intercepted" paragraph names is exported;
* every quoted text in the native column is the start of a reason text of
  pmpi/src/reasons.def (what ACCL_STATS prints);
* every `pmpi/README.md`, "Section" reference in the top-level README names
  a heading of pmpi/README.md.
"""
import re
import subprocess
import sys

pmpi_readme, calls_def, reasons_def, top_readme, library, nm = sys.argv[1:7]

DEVICE_COLUMNS = [
    "bundled emulator (ACCL_DEVICE=emu)",
    "card with our firmware (ACCL_DEVICE=xrt)",
    "public-firmware card or simulation",
    "native, with the reason ACCL_STATS shows",
]
# MPI function names (MPI_Bcast, MPI_Request_c2f), not constants (MPI_COMM_WORLD, MPI_BCAST).
FUNCTION = re.compile(r"\bMPI_[A-Z][a-z0-9_]*\b")
C_ONLY = {"MPI_Request_c2f", "MPI_Request_f2c"}

errors = []


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def cells(line):
    """The cells of a markdown table row; `\\|` is a pipe inside a cell."""
    parts = re.split(r"(?<!\\)\|", line.strip())
    return [p.strip() for p in parts[1:-1]]


def plain(text):
    return text.replace("`", "")


readme = read(pmpi_readme)
section_match = re.search(r"^## What runs where\n(.*?)(?=^## )", readme, re.S | re.M)
if not section_match:
    sys.exit(f'{pmpi_readme}: no section "## What runs where"')
section = section_match.group(1)
table = []
for line in section.splitlines():
    if line.startswith("|"):
        table.append(line)
    elif table:
        break  # the first table of the section only
if len(table) < 3:
    sys.exit(f'{pmpi_readme}: no table in "What runs where"')

header = cells(table[0])
if len(header) != 1 + len(DEVICE_COLUMNS):
    errors.append(f"header has {len(header)} columns, wants 5: calls + {DEVICE_COLUMNS}")
for i, want in enumerate(DEVICE_COLUMNS, start=1):
    if i < len(header) and not plain(header[i]).startswith(want):
        errors.append(f'header column {i + 1} is "{plain(header[i])}", wants "{want} ..."')

rows = [cells(line) for line in table[2:]]
listed = set()
quoted = []
for row in rows:
    names = FUNCTION.findall(row[0]) if row else []
    label = ", ".join(names[:3]) or (row[0][:60] if row else "(empty row)")
    if len(row) != len(header):
        errors.append(f"row {label}: {len(row)} cells, the header has {len(header)}")
    for i, column in enumerate(DEVICE_COLUMNS, start=1):
        if i >= len(row) or not row[i]:
            errors.append(f'row {label}: no "{column}" cell')
    listed.update(names)
    if len(row) == len(header):
        quoted += [(label, q) for q in re.findall(r'"([^"]+)"', row[-1])]

calls = re.findall(r'^CALL\(\w+,\s*"(MPI_\w+)"', read(calls_def), re.M)
if not calls:
    errors.append(f"{calls_def}: no CALL rows")
for name in calls:
    if name not in listed:
        errors.append(f"{name} (pmpi/src/calls.def) is not in the table's calls column")

symbols = set(subprocess.run([nm, "-D", "--defined-only", "--format=just-symbols", library], check=True,
                             capture_output=True, text=True).stdout.split())
exported = {s for s in symbols if FUNCTION.fullmatch(s)}
if not exported:
    errors.append(f"{library} exports no MPI_ function")
for name in sorted(exported - listed - set(calls)):  # calls.def's were reported above
    errors.append(f"{name} (exported by libaccl_pmpi) is not in the table's calls column")
for name in sorted(listed - exported - set(calls)):
    errors.append(f"{name} is in the table but the layer does not intercept it")
for name in sorted(listed & exported - C_ONLY):
    if name.lower() + "_" not in symbols:
        errors.append(f"{name} has no Fortran entry point {name.lower()}_, which the section promises")

never = re.search(r"^Never intercepted.*?(?=\n\n)", section, re.S | re.M)
if not never:
    errors.append('no "Never intercepted" paragraph after the table')
else:
    for name in sorted(set(FUNCTION.findall(never.group(0))) & (exported | set(calls))):
        errors.append(f'{name} is listed as never intercepted, but the layer intercepts it')

reasons = [bytes(t, "utf-8").decode("unicode_escape")
           for t in re.findall(r'^REASON\(\w+,\s*"((?:[^"\\]|\\.)*)"', read(reasons_def), re.M)]
for label, text in quoted:
    start = text.removeprefix("...").removesuffix("...").strip()
    if not any(r.startswith(start) for r in reasons):
        errors.append(f'row {label}: "{text}" is no reason text of pmpi/src/reasons.def (nor the start of one)')

headings = set(re.findall(r"^#+ (.+)$", readme, re.M))
for ref in re.findall(r'`pmpi/README\.md`,\s+"([^"]+)"', read(top_readme)):
    if ref not in headings:
        errors.append(f'README.md points to pmpi/README.md, "{ref}", which has no such heading')

if errors:
    print("\n".join(f"{pmpi_readme}: {e}" for e in errors))
    sys.exit(1)
print(f"{len(rows)} rows cover the {len(calls)} calls of calls.def and {len(exported)} exported C entry points")
