#!/usr/bin/env bash
# Brings Paddock up on this machine: packages, the box engine, paddockd on
# http://127.0.0.1:7423 (SQLite, local engine), the CLI logged in, the box image built.
# Debian 12 / Ubuntu 22.04+ as root. Safe and quick to run again.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PREFIX=${PADDOCK_PREFIX:-/opt/paddock}
VENV=$PREFIX/venv
CONFIG=/etc/paddock/paddockd.toml
PORT=${PADDOCK_PORT:-7423}
URL=http://127.0.0.1:$PORT
LOG_DIR=/var/log/paddock
SUBID_START=200000

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
die() { printf 'install.sh: %s\n' "$*" >&2; exit 1; }
usage() {
    cat <<'USAGE'
Usage: ./install.sh [--hostname HOST [--tls acme|internal] [--email ADDRESS]]
       ./install.sh --uninstall [--yes] [--purge] [--dry-run]

Brings Paddock up on this machine (as root; safe to run again). Without --hostname,
paddockd serves http://127.0.0.1:7423 to this machine only. With --hostname, Caddy
serves https://HOST on ports 80 and 443 in front of it (a certificate from Let's
Encrypt/ZeroSSL: HOST's DNS must point here and both ports be reachable), or with
--tls internal from Caddy's own CA (tests, private networks).

--uninstall stops and removes Paddock: its services and units, every box (the engine's
data root: images, boxes' files, snapshots, drives), Caddy's configuration, the CLI and
/opt/paddock. It keeps /var/lib/paddock (database, keys, certificates), the settings in
/etc/paddock/paddockd.toml and the logs, unless --purge. It asks first; --yes does not
(scripts); --dry-run only prints what it would do. Debian packages stay installed.
USAGE
}

HOST_NAME="" TLS=acme EMAIL="" UNINSTALL=false YES=false PURGE=false DRY=false
while [ $# -gt 0 ]; do
    case "$1" in
        --hostname) HOST_NAME=${2:-}; shift 2 || die "--hostname needs a value" ;;
        --hostname=*) HOST_NAME=${1#*=}; shift ;;
        --tls) TLS=${2:-}; shift 2 || die "--tls needs a value" ;;
        --tls=*) TLS=${1#*=}; shift ;;
        --email) EMAIL=${2:-}; shift 2 || die "--email needs a value" ;;
        --email=*) EMAIL=${1#*=}; shift ;;
        --uninstall) UNINSTALL=true; shift ;;
        --yes|-y) YES=true; shift ;;
        --purge) PURGE=true; shift ;;
        --dry-run) DRY=true; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown option: $1" ;;
    esac
done

if ! $UNINSTALL; then
    { $YES || $PURGE || $DRY; } && die "--yes, --purge and --dry-run go with --uninstall"
fi
# Everything that can be checked is, before anything changes.
[ "$(id -u)" = 0 ] || die "run as root (sudo ./install.sh)"
if $UNINSTALL; then
    [ -z "$HOST_NAME" ] || die "--uninstall takes no --hostname"
    # shellcheck source=deploy/uninstall.sh
    . "$HERE/deploy/uninstall.sh"
    uninstall
    exit 0
fi
[ "$(uname -s)" = Linux ] || die "the Paddock server runs on Linux"
case "$(uname -m)" in x86_64|aarch64) ;; *) die "unsupported architecture $(uname -m) (amd64 and arm64 are)" ;; esac
command -v apt-get >/dev/null || die "this installer needs Debian 12 or Ubuntu 22.04+ (apt-get)"
if command -v python3 >/dev/null; then
    python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
        || die "Python 3.11 or newer is needed (paddockd reads its settings with tomllib); this has $(python3 -V)"
fi
case "$TLS" in acme|internal) ;; *) die "--tls is acme or internal, not '$TLS'" ;; esac
if [ -n "$HOST_NAME" ]; then
    case "$HOST_NAME" in
        *://*) die "--hostname takes the name alone, without a scheme: ${HOST_NAME#*://}" ;;
        */*|*:*) die "--hostname takes the name alone, without a port or path" ;;
    esac
    [[ "$HOST_NAME" =~ ^[0-9.]+$ ]] && die "--hostname $HOST_NAME is an IP address: certificates are issued for DNS names"
    [[ "$HOST_NAME" =~ ^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)+$ ]] \
        || die "--hostname '$HOST_NAME' is not a hostname like paddock.example.com"
    taken=$(ss -Hltnp '( sport = :80 or sport = :443 )' 2>/dev/null | grep -v '"caddy"' || true)
    [ -z "$taken" ] || die "ports 80/443 are taken by another program (Caddy needs them):
$taken"
    if [ "$TLS" = acme ]; then
        resolved=$(getent ahostsv4 "$HOST_NAME" | awk '{print $1; exit}' || true)
        if [ -z "$resolved" ]; then
            echo "warning: $HOST_NAME does not resolve yet; the certificate comes once it points here" >&2
        elif ! ip -4 -o addr | grep -qw "$resolved"; then
            echo "warning: $HOST_NAME resolves to $resolved, not an address of this machine (fine behind NAT)" >&2
        fi
    fi
fi
systemd=false
[ "$(cat /proc/1/comm 2>/dev/null)" = systemd ] && systemd=true

step "Debian packages"
packages=(docker.io nftables conntrack mmdebstrap iproute2 uidmap python3 python3-venv ca-certificates curl lxcfs xfsprogs e2fsprogs)
# The dashboard's build needs node and npm; a Node already installed (NodeSource's nodejs
# carries its own npm and conflicts with Debian's) is used as it is.
command -v npm >/dev/null || packages+=(nodejs npm)
[ -n "$HOST_NAME" ] && packages+=(caddy)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
else
    echo "all present"
fi

step "User-namespace range for boxes (box root is never host root)"
id paddock >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin paddock
for f in /etc/subuid /etc/subgid; do
    touch "$f"
    if ! grep -q '^paddock:' "$f"; then
        # Refuse to overlap another user's range.
        if awk -F: -v s=$SUBID_START '$2 < s+65536 && $2+$3 > s {bad=1} END {exit !bad}' "$f"; then
            die "$f already has a range overlapping $SUBID_START-$((SUBID_START + 65535)); add 'paddock:START:65536' by hand"
        fi
        echo "paddock:$SUBID_START:65536" >> "$f"
    fi
done
grep '^paddock:' /etc/subuid

# A Debian package's files without installing it (nor its dependencies).
unpack_deb() {  # unpack_deb PACKAGE DIR
    local tmp
    tmp=$(mktemp -d)
    chown _apt "$tmp" 2>/dev/null || true  # apt downloads as _apt
    (cd "$tmp" && apt-get download -q "$1" >/dev/null)
    mkdir -p "$2"
    dpkg-deb -x "$tmp"/"$1"_*.deb "$2"
    rm -rf "$tmp"
}

step "Seccomp profile base for boxes (containers-common's default, from Debian)"
seccomp_base=/var/lib/paddock/seccomp/containers-common.json
if [ ! -s "$seccomp_base" ]; then
    tmp=$(mktemp -d)
    unpack_deb golang-github-containers-common "$tmp"
    mkdir -p "$(dirname "$seccomp_base")"
    cp "$tmp"/usr/share/containers/seccomp.json "$seccomp_base"
    rm -rf "$tmp"
fi
echo "$seccomp_base"

step "noVNC for the desktop in the browser (Debian's novnc, files only)"
novnc=/opt/paddock/novnc
if [ ! -s "$novnc/usr/share/novnc/core/rfb.js" ]; then
    unpack_deb novnc "$novnc"
fi
echo "$novnc/usr/share/novnc"

step "Web dashboard (web/: npm packages from its lockfile, bundled; nothing from a CDN)"
"$HERE/scripts/build-dashboard"

step "Python environment ($VENV)"
py=$(command -v python3)
[ -x "$VENV/bin/python" ] || "$py" -m venv "$VENV"
stamp="$VENV/.paddock-installed"
# The checkout's state: an update (git pull) or a move means reinstall and restart.
want="$( (cat "$HERE/pyproject.toml"; git -C "$HERE" rev-parse HEAD 2>/dev/null) | sha256sum | cut -c1-16) $HERE"
updated=false
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    updated=true
    "$VENV/bin/pip" install -q --upgrade pip
    "$VENV/bin/pip" install -q -e "$HERE[server,mcp]"
    echo "$want" > "$stamp"
    # Bytecode up front: some environments set PYTHONDONTWRITEBYTECODE, and then every
    # `paddock` run would compile the client again (tens of ms on a small VPS).
    "$VENV/bin/python" -m compileall -q "$HERE/src" >/dev/null
else
    echo "up to date"
fi
ln -sf "$VENV/bin/paddock" /usr/local/bin/paddock
ln -sf "$VENV/bin/paddockd" /usr/local/bin/paddockd

step "Clients for laptops (served at /clients: the Python package, the TypeScript SDK)"
PADDOCK_PYTHON="$VENV/bin/python" "$HERE/scripts/build-clients" /var/lib/paddock/clients

step "Configuration ($CONFIG)"
mkdir -p /etc/paddock "$LOG_DIR"
# Logs are root's alone (older installs left them readable by every local user).
chmod 0700 "$LOG_DIR"
find "$LOG_DIR" -maxdepth 1 -type f -exec chmod go-rwx {} +
if [ ! -f "$CONFIG" ]; then
    manage=true; $systemd && manage=false
    sed -e "s/@PORT@/$PORT/" -e "s/@MANAGE@/$manage/" "$HERE/deploy/paddockd.toml" > "$CONFIG"
    echo "written"
else
    # The template's old CPU line counted CPU claims (4 x cores): an upgrade takes the
    # newer model (CPU shared, memory counted), unless the line was changed by hand.
    if grep -qx 'cpu_overcommit = 4.0' "$CONFIG" && grep -qx '# cpus = 0                  # 0: host cores x cpu_overcommit' "$CONFIG"; then
        sed -i -e 's/^cpu_overcommit = 4.0$/# cpu_overcommit = 0        # > 0: count CPU claims too, up to host cores x this/' \
            -e 's/^# cpus = 0                  # 0: host cores x cpu_overcommit$/memory_overcommit = 4.0     # memory claims of running boxes: up to this x (host memory - reserve)/' "$CONFIG"
        echo "kept; CPU is now shared rather than counted (docs/server.md \"Capacity\")"
    else
        echo "kept (edit it and restart paddockd to change settings)"
    fi
fi

step "Box engine and paddockd"
# The supervisor lives outside the checkout: removing the clone must not stop restarts.
install -D -m 0755 "$HERE/deploy/paddockd-supervise" "$PREFIX/bin/paddock-supervise"
if $systemd; then
    install -m 0644 "$HERE"/deploy/systemd/*.service /etc/systemd/system/
    # LXCFS (boxes' own /proc views) runs before paddockd starts any box.
    install -D -m 0644 "$HERE"/deploy/systemd/lxcfs.service.d/paddock.conf \
        /etc/systemd/system/lxcfs.service.d/paddock.conf
    systemctl daemon-reload
    systemctl enable --now lxcfs.service paddock-engine.service paddockd.service
    if paddockd engine disk >/dev/null 2>&1; [ $? -eq 3 ]; then
        echo "moving the box engine's data onto a filesystem of its own"
        systemctl restart paddock-engine.service
    fi
    $updated && systemctl restart paddockd.service
else
    # No service manager (containers, CI): paddockd starts the engine and LXCFS itself
    # (and again whenever either died), and a small supervisor restarts paddockd if it dies.
    if paddockd engine disk >/dev/null 2>&1; [ $? -eq 3 ] && paddockd engine status >/dev/null; then
        # The engine's data moves onto a filesystem of its own at its next start (a copy:
        # minutes for a large engine). Running boxes stop meanwhile and come back.
        echo "moving the box engine's data onto a filesystem of its own"
        paddockd engine stop
    fi
    paddockd engine start
    supervisor=$(cat /run/paddock/supervise.pid 2>/dev/null || true)
    if $updated && [ -n "$supervisor" ] && kill -0 "$supervisor" 2>/dev/null; then
        echo "restarting paddockd with the updated code"
        kill "$supervisor"
        for _ in $(seq 1 50); do curl -fsS "$URL/v1/health" >/dev/null 2>&1 || break; sleep 0.2; done
    fi
    if ! curl -fsS "$URL/v1/health" >/dev/null 2>&1; then
        setsid "$PREFIX/bin/paddock-supervise" >/dev/null 2>&1 < /dev/null &
    fi
fi
echo "box disks: $(paddockd engine disk | cut -d' ' -f2-)"
for _ in $(seq 1 100); do
    curl -fsS "$URL/v1/health" >/dev/null 2>&1 && break
    sleep 0.2
done
curl -fsS "$URL/v1/health" >/dev/null || die "paddockd did not come up; see $LOG_DIR/paddockd.log"
echo "paddockd is up at $URL"

if [ -n "$HOST_NAME" ]; then
    step "HTTPS for $HOST_NAME (Caddy in front, paddockd stays on 127.0.0.1)"
    if $systemd; then
        paddockd configure --hostname "$HOST_NAME" --tls "$TLS" ${EMAIL:+--email "$EMAIL"} --service
        # Debian's own caddy.service would claim the same ports with its sample site.
        systemctl disable --now caddy.service 2>/dev/null || true
        install -m 0644 "$HERE/deploy/systemd/paddock-caddy.service" /etc/systemd/system/
        systemctl daemon-reload
        systemctl enable paddock-caddy.service
        systemctl restart paddock-caddy.service
        caddy_data=/var/lib/paddock-caddy
    else
        paddockd configure --hostname "$HOST_NAME" --tls "$TLS" ${EMAIL:+--email "$EMAIL"}
        # The supervisor starts Caddy once the file exists: restart it if it predates that.
        supervisor=$(cat /run/paddock/supervise.pid 2>/dev/null || true)
        if ! pgrep -f "caddy run --config /etc/paddock/Caddyfile" >/dev/null; then
            [ -n "$supervisor" ] && kill "$supervisor" 2>/dev/null || true
            sleep 1
            setsid "$PREFIX/bin/paddock-supervise" >/dev/null 2>&1 < /dev/null &
        fi
        caddy_data=/var/lib/paddock/caddy
    fi
    PUBLIC=https://$HOST_NAME
    cacert=()
    [ "$TLS" = internal ] && cacert=(--cacert "$caddy_data/pki/authorities/local/root.crt")
    for _ in $(seq 1 150); do
        [ "$TLS" = internal ] && [ ! -f "${cacert[1]}" ] && { sleep 0.2; continue; }
        curl -fsS "${cacert[@]}" --resolve "$HOST_NAME:443:127.0.0.1" "$PUBLIC/v1/health" >/dev/null 2>&1 && break
        sleep 0.2
    done
    if curl -fsS "${cacert[@]}" --resolve "$HOST_NAME:443:127.0.0.1" "$PUBLIC/v1/health" >/dev/null 2>&1; then
        echo "paddockd is up at $PUBLIC"
    else
        echo "warning: $PUBLIC does not answer yet (a public certificate needs DNS and ports 80/443 reachable); see the Caddy log" >&2
    fi
    [ "$TLS" = internal ] && echo "Caddy's local CA (clients: PADDOCK_CA_BUNDLE=FILE): ${cacert[1]}"
fi

step "CLI login"
if paddock status >/dev/null 2>&1; then
    echo "already logged in"
else
    paddockd token create --name "cli@$(hostname)" | paddock login "$URL" --token-stdin
fi

step "Box image (first build takes a few minutes; later runs use the cache)"
paddock image build --quiet

if link=$(paddockd setup-link 2>/dev/null); then
    step "The owner's account"
    echo "Open this link once to create the owner account (valid 24 hours; \`paddockd setup-link\` makes a new one):"
    echo "  $link"
fi

cat <<MSG

Paddock is ready. Try:
  paddock new --type small --ttl 3600
  paddock push current . --to /config/project
  paddock exec current -- bash -lc 'cd /config/project && ls'
  paddock stop current
More: paddock --help, docs/cli.md. Server log: $LOG_DIR/paddockd.log
MSG
