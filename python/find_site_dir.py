# SPDX-License-Identifier: Apache-2.0
"""Prints where pyaccl must be installed for this interpreter to import it.

Usage: find_site_dir.py PREFIX DEFAULT_DIR. Prints nothing when DEFAULT_DIR
(Meson's choice) is on sys.path. Meson 1.0 on Debian picks
PREFIX/lib/python3/dist-packages, which Debian's python3 searches only for
PREFIX=/usr; for /usr/local it searches /usr/local/lib/python3.X/dist-packages.
Then this prints the sys.path entry under PREFIX, if there is one.
"""

import os
import sys


def main(prefix, default_dir):
    search = [os.path.normpath(p) for p in sys.path if p]
    if os.path.normpath(default_dir) in search:
        return ""
    root = os.path.normpath(prefix) + os.sep
    for path in search:
        if path.startswith(root) and os.path.basename(path) in ("dist-packages", "site-packages"):
            return path
    return ""


if __name__ == "__main__":
    print(main(sys.argv[1], sys.argv[2]))
