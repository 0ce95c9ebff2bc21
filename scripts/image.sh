#!/usr/bin/env bash
# meshpilot's control-plane image (docker/Dockerfile; docs/INSTALL.md, "The image").
#
#   scripts/image.sh build [--binary PATH] [--tag TAG]
#       Stages a root filesystem (the binary at /usr/local/bin/meshpilot, the shared libraries `ldd`
#       lists for it, CA certificates, passwd/group entries for 1337) and builds docker/Dockerfile over
#       it with the first builder found: buildah, podman, or docker (when its engine answers).
#       Without --binary, builds `cargo build --release -p meshpilot` first. TAG defaults to
#       localhost/meshpilot:<version of crates/meshpilot>.
#   scripts/image.sh run [PODMAN-RUN-ARGS...]
#       `podman run` with what this kind of machine needs: on a host with hybrid cgroups (v1 controllers
#       plus an empty /sys/fs/cgroup/unified), crun refuses to start, so podman runs in a private mount
#       namespace with the unified hierarchy unmounted, no cgroups, and ulimits it is allowed to set.
#   scripts/image.sh podman|buildah ARGS...
#       The tool with the same storage settings (e.g. `scripts/image.sh podman images`).
#   scripts/image.sh install-builder
#       Debian's buildah and podman (apt; root or sudo).
#
# MESHPILOT_IMAGE_STORAGE=DIR keeps images and containers under DIR (vfs driver) instead of the tools'
# defaults: the tests use it so that nothing is left behind.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "image.sh: $*" >&2; exit 1; }

storage_flags=()
if [ -n "${MESHPILOT_IMAGE_STORAGE:-}" ]; then
  storage_flags=(--root "$MESHPILOT_IMAGE_STORAGE/root" --runroot "$MESHPILOT_IMAGE_STORAGE/run" --storage-driver vfs)
fi

version() { sed -n 's/^version *= *"\(.*\)"/\1/p' crates/meshpilot/Cargo.toml | head -1; }

# Copies FILE into ROOT at the same path, following symlinks (a library's soname link becomes the file).
stage_file() { # ROOT FILE
  mkdir -p "$1$(dirname "$2")"
  cp -L "$2" "$1$2"
}

stage() { # BINARY ROOT
  local binary="$1" root="$2" lib
  mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs" "$root/tmp"
  cp -L "$binary" "$root/usr/local/bin/meshpilot"
  chmod 0755 "$root/usr/local/bin/meshpilot"
  # The dynamic loader and every library the binary links (`ldd` prints "name => /path (addr)" and the
  # loader as "/path (addr)").
  while read -r lib; do
    [ -n "$lib" ] && stage_file "$root" "$lib"
  done < <(ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}')
  if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
  fi
  # Istio's images name 1337 istio-proxy; glibc's resolver reads nsswitch.conf.
  printf 'root:x:0:0:root:/root:/sbin/nologin\nistio-proxy:x:1337:1337:istio-proxy:/:/sbin/nologin\n' >"$root/etc/passwd"
  printf 'root:x:0:\nistio-proxy:x:1337:\n' >"$root/etc/group"
  printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
  chmod 1777 "$root/tmp"
}

build() {
  local binary="" tag=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --binary) binary="$2"; shift 2 ;;
      --tag) tag="$2"; shift 2 ;;
      *) die "build: unknown argument $1" ;;
    esac
  done
  if [ -z "$binary" ]; then
    cargo build --release --locked -p meshpilot
    binary="${CARGO_TARGET_DIR:-target}/release/meshpilot"
  fi
  [ -x "$binary" ] || die "no executable at $binary"
  tag="${tag:-localhost/meshpilot:$(version)}"
  local context
  context="$(mktemp -d)"
  trap 'rm -rf "$context"' RETURN
  cp docker/Dockerfile "$context/Dockerfile"
  stage "$binary" "$context/rootfs"
  if command -v buildah >/dev/null 2>&1; then
    buildah "${storage_flags[@]}" build --quiet --isolation chroot -f "$context/Dockerfile" -t "$tag" "$context"
  elif command -v podman >/dev/null 2>&1; then
    podman "${storage_flags[@]}" build --quiet -f "$context/Dockerfile" -t "$tag" "$context"
  elif command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
    docker build --quiet -f "$context/Dockerfile" -t "$tag" "$context"
  else
    die "no image builder: install buildah or podman (scripts/image.sh install-builder), or start a Docker engine"
  fi
  echo "built $tag" >&2
}

# podman with the storage settings; on a hybrid-cgroup host, inside a private mount namespace without
# the unified hierarchy (crun: "cgroups in hybrid mode not supported").
podman_cmd() {
  command -v podman >/dev/null 2>&1 || die "podman is not installed (scripts/image.sh install-builder)"
  if mountpoint -q /sys/fs/cgroup/unified 2>/dev/null; then
    exec unshare --mount --propagation private -- sh -c 'umount /sys/fs/cgroup/unified && exec "$@"' podman \
      podman "${storage_flags[@]}" --cgroup-manager cgroupfs "$@"
  fi
  exec podman "${storage_flags[@]}" "$@"
}

run() {
  local extra=()
  if mountpoint -q /sys/fs/cgroup/unified 2>/dev/null; then
    # crun sets every rlimit itself; here raising RLIMIT_NPROC past 32768 is refused (EPERM) even at the
    # host's own value, so processes are capped there.
    local nproc
    nproc="$(ulimit -Su)"
    if [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ]; then nproc=32768; fi
    extra=(--cgroups disabled --ulimit "nofile=$(ulimit -Sn):$(ulimit -Hn)" --ulimit "nproc=$nproc:$nproc")
  fi
  podman_cmd run "${extra[@]}" "$@"
}

case "${1:-}" in
  build) shift; build "$@" ;;
  run) shift; run "$@" ;;
  podman) shift; podman_cmd "$@" ;;
  buildah) shift; command -v buildah >/dev/null 2>&1 || die "buildah is not installed"; exec buildah "${storage_flags[@]}" "$@" ;;
  install-builder)
    if command -v buildah >/dev/null 2>&1 && command -v podman >/dev/null 2>&1; then exit 0; fi
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq buildah podman >/dev/null ;;
  *) die "usage: $0 build [--binary PATH] [--tag TAG] | run [PODMAN-RUN-ARGS...] | podman ARGS... | buildah ARGS... | install-builder" ;;
esac
