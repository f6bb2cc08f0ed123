#!/bin/bash
# The devices part of scripts/bench alone, 9 rounds (full mode's count), to see how stable its verdicts are
# beside the quick run 2026-12-07T16-15-19Z; then the report, of which rows.md keeps the allocate-and-register rows.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
OUT=$(cd "$(dirname "$0")" && pwd)
source "$ROOT/scripts/lib.sh"
mrd_find_java && mrd_jvm_flags
LIB=$("$ROOT/emulator/build" | tail -n1)
C=$(mktemp -d)
read -r -a cflags < <("$ROOT/emulator/build" --cflags) || true
gcc -O2 -Wall -Wextra -pthread "${cflags[@]}" -o "$C/multi_reg_ref" "$ROOT/bench/src/main/c/multi_reg_ref.c" "$LIB" \
  -Wl,-rpath,"$(dirname "$LIB")"
cp "$ROOT/bench/target/mrd-bench.jar" "$C/"
JAVA=("$MRD_JAVA" "${MRD_JVM_FLAGS[@]}" "-Dmrd.jvm.flags=${MRD_JVM_FLAGS[*]}" "-Dmrd.root=$ROOT" "-Dmrd.bench.emulator=$LIB"
  -Dmrd.bench.shm=/dev/shm "-Dmrd.bench.c=$C" -jar "$C/mrd-bench.jar")
"${JAVA[@]}" devices --rounds 9 --out "$OUT" > "$OUT/devices-runner.log" 2>&1
"${JAVA[@]}" report --out "$OUT" --cores "$(nproc)" > /dev/null
{ head -n 2 "$OUT/table.md"; grep -E '^[|] allocate-and-register' "$OUT/table.md"; } > "$OUT/rows.md"
rm -rf "$C" "$OUT/table.md" "$OUT/lookup.png"
