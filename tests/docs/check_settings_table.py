#!/usr/bin/env python3
"""Fails when README.md's settings table differs from the settings table in
core/src/config_table.cpp, as `accl-info --settings-markdown` prints it.

The README stays the one place a user reads about configuration, and it is
generated from the one list the code validates against. To update it, paste
the output of `accl-info --settings-markdown` between the markers
(scripts may do: python3 tests/docs/check_settings_table.py README.md
build/tools/accl-info --write).
"""
import difflib
import subprocess
import sys

readme_path, accl_info = sys.argv[1], sys.argv[2]
write = "--write" in sys.argv[3:]
begin, end = "<!-- settings-table-begin -->\n", "<!-- settings-table-end -->"

generated = subprocess.run([accl_info, "--settings-markdown"], check=True, capture_output=True, text=True).stdout
readme = open(readme_path, encoding="utf-8").read()
head, rest = readme.split(begin)
documented, tail = rest.split(end)

if write:
    open(readme_path, "w", encoding="utf-8").write(head + begin + generated + end + tail)
    print(f"{readme_path}: settings table written")
    sys.exit(0)
if documented != generated:
    sys.stdout.writelines(difflib.unified_diff(documented.splitlines(True), generated.splitlines(True),
                                               "README.md", "accl-info --settings-markdown"))
    print("README.md's settings table differs from the code's (core/src/config_table.cpp); "
          "regenerate it with --write")
    sys.exit(1)
print(f"{generated.count(chr(10)) - 2} settings checked, README.md matches")
