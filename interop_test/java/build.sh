#!/usr/bin/env bash
# Builds the Redisson interop driver:
#   target/driver.jar          Driver (and any other main class), compiled once
#   target/lib-<version>/      runtime jars of each Redisson version in versions.txt
# Prints the built versions, one per line, on stdout (diagnostics go to stderr).
#
# Skips everything when the outputs are newer than pom.xml, versions.txt,
# build.sh and src/. Tries Maven offline first (nothing is re-downloaded or
# re-checked when ~/.m2 already has it) and goes online only if that fails.
# Set FORCE=1 to rebuild anyway; MVN to use another maven binary.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
mvn_bin="${MVN:-mvn}"
# Short-lived Maven runs: C1 only and serial GC start noticeably faster.
export MAVEN_OPTS="${MAVEN_OPTS:--XX:TieredStopAtLevel=1 -XX:+UseSerialGC}"

mapfile -t versions < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' versions.txt | grep -v '^$' || true)
if [ "${#versions[@]}" -eq 0 ]; then
    echo "build.sh: no versions in $here/versions.txt" >&2
    exit 1
fi
# The driver is compiled against the oldest listed version: it only uses API
# that every later line still has (checked by running it against each one).
compile_version="$(printf '%s\n' "${versions[@]}" | sort -V | head -n1)"

stamp=target/.build-stamp
want_stamp="compile=$compile_version versions=${versions[*]}"

up_to_date() {
    [ "${FORCE:-0}" = 1 ] && return 1
    [ -f "$stamp" ] && [ -f target/driver.jar ] || return 1
    [ "$(cat "$stamp")" = "$want_stamp" ] || return 1
    local v
    for v in "${versions[@]}"; do
        [ -f "target/lib-$v/redisson-$v.jar" ] || return 1
    done
    # Any source newer than the stamp?
    [ -z "$(find pom.xml versions.txt build.sh src -newer "$stamp" -print -quit)" ]
}

# mvn_run ARGS...: offline first, then online; quiet unless both fail.
mvn_run() {
    local log
    log="$(mktemp)"
    if "$mvn_bin" -q -B -o "$@" >"$log" 2>&1 || "$mvn_bin" -q -B "$@" >"$log" 2>&1; then
        rm -f "$log"
        return 0
    fi
    cat "$log" >&2
    rm -f "$log"
    echo "build.sh: $mvn_bin $* failed" >&2
    return 1
}

if ! up_to_date; then
    command -v "$mvn_bin" >/dev/null || { echo "build.sh: $mvn_bin not found" >&2; exit 1; }
    rm -f "$stamp"
    for v in "${versions[@]}"; do
        rm -rf "target/lib-$v" # no stale jars from an older pom
    done
    # Compiles and jars the driver, copies the compile version's runtime jars.
    mvn_run package -Dredisson.version="$compile_version"
    for v in "${versions[@]}"; do
        [ "$v" = "$compile_version" ] && continue
        mvn_run dependency:copy-dependencies@copy-libs -Dredisson.version="$v"
    done
    for v in "${versions[@]}"; do
        if [ ! -f "target/lib-$v/redisson-$v.jar" ]; then
            echo "build.sh: target/lib-$v/redisson-$v.jar missing after the build" >&2
            exit 1
        fi
    done
    printf '%s\n' "$want_stamp" >"$stamp"
fi

printf '%s\n' "${versions[@]}"
