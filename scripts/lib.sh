# shellcheck shell=bash
# scripts/lib.sh — helpers shared by scripts/mrd, scripts/test, scripts/bench,
# scripts/install, scripts/setup-hugepages, examples/run and .ci/run. Source
# it; do not run it.
#
#   source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib.sh"
#
# Functions:
#   mrd_root             print the repository root (symlinks resolved)
#   mrd_find_java        find a JDK >= MRD_JAVA_MIN (25): sets and exports
#                        MRD_JAVA_HOME and MRD_JAVA; on failure prints one line
#                        to stderr and returns 127 (callers: `mrd_find_java || exit $?`)
#   mrd_java_major JAVA  print the feature version (8, 17, 25, ...) of a java binary
#   mrd_jvm_flags        fill the array MRD_JVM_FLAGS from scripts/jvm-flags (a
#                        worker's) and scripts/daemon-jvm-flags (what the
#                        daemon and the CLI add): what scripts/mrd passes
#   mrd_check_jvm_flags  fail (with the difference) if those two files and
#                        <mrd.jvm.flags> in pom.xml differ
#   mrd_maven_env        export JAVA_HOME and MAVEN_OPTS for running mvn
#   mrd_project_version  print the version of the root pom.xml (0.1.0-SNAPSHOT),
#                        which scripts/install installs and examples/ depends on
#   mrd_hugepages_free   print free 2 MiB hugepages (0 if the kernel has none)

if [[ -n "${MRD_LIB_SOURCED:-}" ]]; then
  return 0
fi
MRD_LIB_SOURCED=1

# The minimum JDK: FFM fixed-address mapping and the flags in jvm-flags need 25.
MRD_JAVA_MIN=25

# Resolved once, from this file's own location, so that callers work from any
# current directory and through symlinks (e.g. /usr/local/bin/mrd -> scripts/mrd).
MRD_LIB_DIR="$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")"

MRD_HUGEPAGES_SYSFS=/sys/kernel/mm/hugepages/hugepages-2048kB

mrd_root() {
  dirname "$MRD_LIB_DIR"
}

# Prints the feature version of the java binary $1, or nothing if it does not
# run. `java -version` prints e.g. `openjdk version "25.0.3" 2026-04-21 LTS`,
# `java version "1.8.0_402"` or `openjdk version "26-ea" ...`.
mrd_java_major() {
  local version
  version="$(mrd_java_version "$1")"
  if [[ "$version" == 1.* ]]; then
    version="${version#1.}"
  fi
  version="${version%%[!0-9]*}"
  [[ -n "$version" ]] && printf '%s\n' "$version"
  return 0
}

# Prints the version string of the java binary $1 ("25.0.3"), or nothing if
# it does not run. The JDK's `release` file (JAVA_VERSION="25.0.3") is read
# when present: starting each JVM for `java -version` costs ~150 ms, paid on
# every scripts/mrd call. The whole output is read before matching so that no
# pipe closes early under pipefail.
mrd_java_version() {
  local out release
  [[ -x "$1" ]] || return 0
  release="$(dirname "$(dirname "$1")")/release"
  if [[ -r "$release" ]]; then
    out="$(< "$release")"
    if [[ "$out" =~ (^|$'\n')JAVA_VERSION=\"([^\"]+)\" ]]; then
      printf '%s\n' "${BASH_REMATCH[2]}"
      return 0
    fi
  fi
  out="$("$1" -version 2>&1)" || return 0
  if [[ "$out" =~ version\ \"([^\"]+)\" ]]; then
    printf '%s\n' "${BASH_REMATCH[1]}"
  fi
  return 0
}

mrd_find_java() {
  local major candidate home best_home="" best_version="" version seen=""
  if [[ -n "${JAVA_HOME:-}" ]]; then
    major="$(mrd_java_major "$JAVA_HOME/bin/java")"
    if [[ -n "$major" ]] && (( major >= MRD_JAVA_MIN )); then
      MRD_JAVA_HOME="$(readlink -f "$JAVA_HOME")"
      MRD_JAVA="$MRD_JAVA_HOME/bin/java"
      export MRD_JAVA_HOME MRD_JAVA
      return 0
    fi
  fi
  for candidate in /usr/lib/jvm/*/bin/java; do
    [[ -x "$candidate" ]] || continue
    home="$(readlink -f "$(dirname "$(dirname "$candidate")")")"
    # Debian links java-1.17.0-openjdk-amd64 -> java-17-openjdk-amd64.
    [[ "$home" != "$best_home" && " $seen " != *" $home "* ]] || continue
    seen+=" $home"
    major="$(mrd_java_major "$candidate")"
    if [[ -z "$major" ]] || (( major < MRD_JAVA_MIN )); then
      continue
    fi
    version="$(mrd_java_version "$candidate")"
    if [[ -z "$best_home" ]] \
        || [[ "$(printf '%s\n%s\n' "$best_version" "$version" | sort -V | tail -n1)" == "$version" \
              && "$version" != "$best_version" ]]; then
      best_home="$home"
      best_version="$version"
    fi
  done
  if [[ -n "$best_home" ]]; then
    MRD_JAVA_HOME="$best_home"
    MRD_JAVA="$MRD_JAVA_HOME/bin/java"
    export MRD_JAVA_HOME MRD_JAVA
    return 0
  fi
  echo "mrd: no JDK ${MRD_JAVA_MIN} or newer found (checked JAVA_HOME=${JAVA_HOME:-<unset>} and /usr/lib/jvm); install one (e.g. Temurin ${MRD_JAVA_MIN}) or set JAVA_HOME" >&2
  return 127
}

# Reads scripts/jvm-flags then scripts/daemon-jvm-flags (one flag per line;
# blank lines and # comments ignored) into the array MRD_JVM_FLAGS: the flags
# of a daemon or CLI process, which is also a secondary.
mrd_jvm_flags() {
  MRD_JVM_FLAGS=()
  mrd_read_jvm_flags "$MRD_LIB_DIR/jvm-flags" "the JVM flags every mrd process needs" || return 1
  mrd_read_jvm_flags "$MRD_LIB_DIR/daemon-jvm-flags" "the JVM flags the daemon and the CLI add" || return 1
}

# Appends the flags of file $1 (described by $2 in the error) to MRD_JVM_FLAGS.
mrd_read_jvm_flags() {
  local file="$1" line
  if [[ ! -r "$file" ]]; then
    echo "mrd: cannot read $file ($2)" >&2
    return 1
  fi
  while IFS= read -r line || [[ -n "$line" ]]; do
    line="${line%%#*}"
    line="${line#"${line%%[![:space:]]*}"}"
    line="${line%"${line##*[![:space:]]}"}"
    [[ -n "$line" ]] && MRD_JVM_FLAGS+=("$line")
  done < "$file"
  return 0
}

mrd_hugepages_free() {
  if [[ -r "$MRD_HUGEPAGES_SYSFS/free_hugepages" ]]; then
    cat "$MRD_HUGEPAGES_SYSFS/free_hugepages"
  else
    echo 0
  fi
}

# Checks that scripts/jvm-flags followed by scripts/daemon-jvm-flags lists
# exactly the flags of <mrd.jvm.flags> in the root pom.xml (same flags, same
# order), so that the tests (Surefire's argLine, daemon and client tests alike)
# and the launched processes run with the same JVM flags. Prints the
# difference to stderr and returns 1 when they differ.
mrd_check_jvm_flags() {
  local pom pom_flags=() flags_text pom_text
  pom="$(mrd_root)/pom.xml"
  mrd_jvm_flags || return 1
  pom_text="$(tr -s '[:space:]' ' ' < "$pom" \
      | grep -oE '<mrd\.jvm\.flags>[^<$]*</mrd\.jvm\.flags>' | head -n1)" || true
  pom_text="${pom_text#<mrd.jvm.flags>}"
  pom_text="${pom_text%</mrd.jvm.flags>}"
  read -ra pom_flags <<< "$pom_text"
  if (( ${#pom_flags[@]} == 0 )); then
    echo "mrd: no <mrd.jvm.flags> property found in $pom" >&2
    return 1
  fi
  flags_text="${MRD_JVM_FLAGS[*]}"
  if [[ "$flags_text" != "${pom_flags[*]}" ]]; then
    echo "mrd: scripts/jvm-flags + scripts/daemon-jvm-flags differ from <mrd.jvm.flags> in pom.xml; make" \
        "the property the first file followed by the second:" >&2
    diff <(printf '%s\n' "${pom_flags[@]}") <(printf '%s\n' "${MRD_JVM_FLAGS[@]}") \
        | sed -n 's/^</  only in pom.xml:        /p; s/^>/  only in the two files: /p' >&2 || true
    return 1
  fi
  return 0
}

# Environment for running Maven: JAVA_HOME = the JDK found by mrd_find_java,
# and Maven's own JVM told that its bundled Guava may use sun.misc.Unsafe
# (else JDK 25 prints a four-line deprecation warning on every build).
mrd_maven_env() {
  export JAVA_HOME="$MRD_JAVA_HOME"
  if [[ " ${MAVEN_OPTS:-} " != *" --sun-misc-unsafe-memory-access="* ]]; then
    export MAVEN_OPTS="${MAVEN_OPTS:+$MAVEN_OPTS }--sun-misc-unsafe-memory-access=allow"
  fi
}

# Prints the version in the root pom.xml: the <version> right after
# <artifactId>mrd-parent</artifactId>. On failure prints one line to stderr and
# returns 1.
mrd_project_version() {
  local pom text
  pom="$(mrd_root)/pom.xml"
  text="$(< "$pom")"
  if [[ "$text" =~ \<artifactId\>mrd-parent\</artifactId\>[[:space:]]*\<version\>([^<]+)\</version\> ]]; then
    printf '%s\n' "${BASH_REMATCH[1]}"
    return 0
  fi
  echo "mrd: no <version> after <artifactId>mrd-parent</artifactId> in $pom" >&2
  return 1
}
