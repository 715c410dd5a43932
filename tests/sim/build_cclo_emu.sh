#!/usr/bin/env bash
# Builds public ACCL's cclo_emu for the public-sim tests, once per build tree:
#   build_cclo_emu.sh PEER_DIR OUT_DIR
# PEER_DIR is ../shared/peers/accl-public (pinned public ACCL with its own build.sh), OUT_DIR the build tree's
# accl-public folder. The build takes 3-6 minutes on 2 cores, so it is skipped while OUT_DIR/emu/cclo_emu is
# newer than every file of PEER_DIR (sources, patch, build script) and than this script. A peer folder that
# changed gets a fresh copy of its sources (build.sh copies them only once). Exit 0 and a one-line note when the
# peer folder is absent: the tests then report themselves skipped with that reason.
set -euo pipefail
peer=${1:?usage: build_cclo_emu.sh PEER_DIR OUT_DIR}
out=${2:?usage: build_cclo_emu.sh PEER_DIR OUT_DIR}
binary=$out/emu/cclo_emu

if [[ ! -x $peer/build.sh ]]; then
  echo "build_cclo_emu: no public ACCL at $peer (no build.sh): the public-sim tests will be skipped"
  exit 0
fi

if [[ -x $binary ]] && [[ ! $0 -nt $binary ]] && [[ -z $(find -L "$peer" -type f -newer "$binary" -print -quit) ]]; then
  echo "build_cclo_emu: $binary is up to date"
  exit 0
fi

# build.sh reuses its copy of the sources when OUT_DIR/src/.ready exists: a stale copy must go.
if [[ -f $out/src/.ready ]] && [[ -n $(find -L "$peer" -type f -newer "$out/src/.ready" -print -quit) ]]; then
  rm -f "$out/src/.ready"
fi
echo "build_cclo_emu: building public ACCL's cclo_emu into $out (3-6 minutes on 2 cores)"
start=$SECONDS
"$peer/build.sh" "$out"
# A build that left the old binary in place (nothing to recompile) must still count as fresh.
touch "$binary"
echo "build_cclo_emu: done in $((SECONDS - start)) s"
