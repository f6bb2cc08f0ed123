#!/bin/bash
# The C reference of issue 23's allocate-and-register rows, by hand (not yet a scripts/bench part):
# 1 GiB on 1, 2, 4 and 8 emulated devices, populated once or pre-touched Mooncake's way, 5 rounds,
# the device counts in alternating order (1 2 4 8, then 8 4 2 1), on tmpfs (/dev/shm).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
LIB=$("$ROOT/emulator/build" | tail -n1)
gcc -O2 -Wall -Wextra -pthread -I "$ROOT/emulator/target/verbs-headers/root/usr/include" -o /tmp/multi_reg_ref \
  "$ROOT/bench/src/main/c/multi_reg_ref.c" "$LIB" -Wl,-rpath,"$(dirname "$LIB")"
export MRDEMU_DIR=$(mktemp -d) MRDEMU_DEVICES=8
D=$(mktemp -d /dev/shm/multi_reg_ref.XXXXXX)
for round in 1 2 3 4 5; do
  if (( round % 2 )); then order="1 2 4 8"; else order="8 4 2 1"; fi
  for mode in once pretouch; do
    for n in $order; do /tmp/multi_reg_ref --dir "$D" --devices "$n" --gib 1 --"$mode" --round "$round"; done
  done
done
rmdir "$D"
