#!/usr/bin/env bash
# Install Jupyter kernels for bash, JavaScript/TypeScript (Deno) and Java (jjava, on a JDK
# from apt where none is there) into the active Python environment (its share/jupyter/kernels),
# and R's with `--with-r` (Debian's IRkernel, through apt). Idempotent: what is installed
# already is left as it is (a second run: a fraction of a second). Needs PyPI and apt when it
# installs, nothing at run time.
# Usage: bash scripts/install-languages.sh [--with-r]   (with the target venv activated)
set -euo pipefail
python=${PYTHON:-$(command -v python || command -v python3)}
prefix=$("$python" -c 'import sys; print(sys.prefix)')
kernels="$prefix/share/jupyter/kernels"

# Write <name>-sandboxed: the kernelspec <name> run by jupyter-ci's sandbox provisioner, where
# that is installed. `boxed deno tcp`: Deno's kernel speaks ZMQ over TCP only; the provisioner
# forwards the host's ipc connections to it inside the box (zmq_over_tcp), and an interrupt
# goes as a message (a SIGINT ends Deno's kernel).
boxed() {
  [ -f "$kernels/$1-sandboxed/kernel.json" ] && return 0
  "$python" - "$kernels/$1/kernel.json" "$kernels/$1-sandboxed/kernel.json" "${2:-}" <<'EOF_'
import json, os, sys
from importlib.metadata import entry_points
if not entry_points(group="jupyter_client.kernel_provisioners", name="jupyter-ci-sandbox"):
    sys.exit(0)
spec = json.load(open(sys.argv[1]))
spec["display_name"] += " (sandboxed)"
provisioner = {"provisioner_name": "jupyter-ci-sandbox"}
if sys.argv[3] == "tcp":
    provisioner["config"] = {"zmq_over_tcp": True}
    spec["interrupt_mode"] = "message"
spec.setdefault("metadata", {})["kernel_provisioner"] = provisioner
os.makedirs(os.path.dirname(sys.argv[2]), exist_ok=True)
json.dump(spec, open(sys.argv[2], "w"), indent=1)
EOF_
}

if ! "$python" -c 'import bash_kernel, deno' >/dev/null 2>&1; then
  # Both are wheels on PyPI: bash_kernel is pure Python, deno ships the deno binary.
  "$python" -m pip install -q "bash_kernel>=0.9" "deno>=2.1"
fi

if [ ! -f "$kernels/bash/kernel.json" ]; then
  "$python" -m bash_kernel.install --sys-prefix >/dev/null
fi
boxed bash

if [ ! -f "$kernels/deno/kernel.json" ]; then
  deno=$("$python" -c 'import deno; print(deno.find_deno_bin())')
  # `deno jupyter --install` writes to the user's data folder whatever JUPYTER_DATA_DIR says:
  # let it write into a scratch HOME, then move the kernelspec into this environment.
  scratch=$(mktemp -d)
  HOME="$scratch" XDG_DATA_HOME="$scratch/.local/share" \
    "$deno" jupyter --install --force >/dev/null 2>&1
  mkdir -p "$kernels"
  rm -rf "$kernels/deno"
  cp -r "$scratch/.local/share/jupyter/kernels/deno" "$kernels/deno"
  rm -rf "$scratch"
  # Plain text results (Deno colours them with ANSI codes, which a model reads as noise), and
  # no look for a newer Deno from the kernel.
  "$python" - "$kernels/deno/kernel.json" <<'EOF_'
import json, sys
spec = json.load(open(sys.argv[1]))
spec.setdefault("env", {}).update(NO_COLOR="1", DENO_NO_UPDATE_CHECK="1")
json.dump(spec, open(sys.argv[1], "w"), indent=1)
EOF_
fi
boxed deno tcp

# Java: jjava (PyPI; a JShell kernel, its kernelspec `java` comes with the wheel) on a JDK 11+
# (jshell). Without a JDK and no way to install one (apt as root or sudo -n), Java is skipped.
if ! command -v jshell >/dev/null 2>&1; then
  sudo_=""
  [ "$(id -u)" = 0 ] || sudo_="sudo -n"
  install=(apt-get install -y -qq --no-install-recommends openjdk-17-jdk-headless)
  $sudo_ "${install[@]}" >/dev/null 2>&1 ||
    { $sudo_ apt-get update -qq && $sudo_ "${install[@]}" >/dev/null; } ||
    echo "note: no JDK (jshell) and apt could not install one: Java sessions are skipped;" \
      "install openjdk-17-jdk-headless and run this again." >&2
fi
if command -v jshell >/dev/null 2>&1; then
  if [ ! -f "$kernels/java/jjava.jar" ]; then
    "$python" -m pip install -q "jjava>=1.0a8"
  fi
  # The JVM straight (jjava's launcher would start a second JVM just to add these options),
  # its heap sized to the process's data limit where there is one (a sandbox box's
  # sandbox_memory_bytes, RLIMIT_DATA): half of it, the rest for metaspace, code and stacks;
  # past it, OutOfMemoryError and the kernel lives (at the JVM's default, a quarter of the
  # machine's memory, the heap would outgrow the box and the JVM die). No hsperfdata file.
  "$python" - "$kernels/java/kernel.json" <<'EOF_'
import json, os, sys
path = sys.argv[1]
spec = json.load(open(path))
if spec["argv"][0] != "/bin/sh":
    jar = os.path.join(os.path.dirname(path), "jjava.jar")
    script = ('limit=$(ulimit -d); heap=""; [ "$limit" = unlimited ] || '
              'heap="-XX:MaxRAM=$((limit * 1024)) -XX:MaxRAMPercentage=50"; '
              'exec java $heap -XX:-UsePerfData '
              '--add-opens jdk.jshell/jdk.jshell=ALL-UNNAMED -jar "$@"')
    spec["argv"] = ["/bin/sh", "-c", script, "jupyter-ci-java", jar, "{connection_file}"]
    spec["display_name"] = "Java"
    json.dump(spec, open(path, "w"), indent=1)
EOF_
  # JeroMQ, jjava's ZMQ, has no ipc transport: TCP forwarded into the box, as Deno's.
  boxed java tcp
fi

if [ "${1:-}" = --with-r ]; then
  if [ ! -f "$kernels/ir/kernel.json" ]; then
    if ! Rscript -e 'library(IRkernel)' >/dev/null 2>&1; then
      # About 30 Debian packages (R itself: some 100 MB installed), ~10 s once apt's lists
      # are there: without recommends, which would add hundreds more.
      sudo_=""
      [ "$(id -u)" = 0 ] || sudo_="sudo -n"
      install=(apt-get install -y -qq --no-install-recommends r-cran-irkernel)
      $sudo_ "${install[@]}" >/dev/null 2>&1 ||
        { $sudo_ apt-get update -qq && $sudo_ "${install[@]}" >/dev/null; }
    fi
    Rscript -e "IRkernel::installspec(user = FALSE, prefix = '$prefix')" >/dev/null
  fi
  boxed ir
fi
