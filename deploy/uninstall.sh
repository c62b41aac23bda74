# `./install.sh --uninstall`: sourced by install.sh (which has parsed the options and
# checked for root). Undoes what install.sh did, in the reverse order, each step safe to
# repeat: an uninstall that stopped halfway is finished by running it again.

# The engine's paths and bridges as paddockd reads them (the settings may move them).
_engine_paths() {
    if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import paddockd' 2>/dev/null; then
        "$VENV/bin/python" - <<'PY'
from paddockd.config import load
c = load()
e = c.engine
print(e.data_root, e.data_image or "-", e.bridge, e.build_bridge, e.lxcfs_dir, e.exec_root, c.boxes_dir)
PY
    else
        echo /var/lib/paddock/engine /var/lib/paddock/engine.xfs paddock0 pdbuild0 /var/lib/lxcfs /run/paddock/engine /var/lib/paddock/boxes
    fi
}

# Runs a step, or with --dry-run says it would.
_do() {
    if $DRY; then
        printf '  would run: %s\n' "$*"
    else
        "$@"
    fi
}

# Removes each path that exists (never a symlink's target).
_remove() {
    local path
    for path in "$@"; do
        if [ -e "$path" ] || [ -L "$path" ]; then _do rm -rf --one-file-system -- "$path"; fi
    done
}

_confirm() {
    $YES && return 0
    $DRY && return 0
    [ -t 0 ] || die "--uninstall removes every box and its files: add --yes to confirm (stdin is not a terminal)"
    printf 'This removes Paddock from this machine, with every box, snapshot and drive'
    $PURGE && printf ', and (--purge) its database, keys, settings and logs'
    printf '.\nType "uninstall" to go on: '
    local answer
    read -r answer
    [ "$answer" = uninstall ] || die "nothing was changed"
}

uninstall() {
    local data_root data_image bridge build_bridge lxcfs_dir exec_root boxes_dir
    read -r data_root data_image bridge build_bridge lxcfs_dir exec_root boxes_dir < <(_engine_paths)
    local systemd=false
    [ "$(cat /proc/1/comm 2>/dev/null)" = systemd ] && systemd=true

    echo "Paddock will be removed from this machine:"
    echo "  services: paddockd, the box engine, Caddy's front door (and their units)"
    echo "  every box, snapshot and drive: $data_root${data_image:+ on $data_image}"
    echo "  the CLI (/usr/local/bin/paddock, paddockd), $PREFIX, /etc/paddock/Caddyfile"
    if $PURGE; then
        echo "  --purge: /var/lib/paddock (database, keys, certificates), /etc/paddock, $LOG_DIR,"
        echo "           the 'paddock' user and its subordinate ids, root's CLI login"
    else
        echo "  kept: /var/lib/paddock (database, keys, certificates), $CONFIG, $LOG_DIR"
        echo "        (add --purge to remove them too)"
    fi
    echo "  kept: Debian packages (docker.io, caddy, lxcfs, ...): apt-get remove them if unused"
    _confirm

    step "Services"
    if $systemd; then
        local unit
        for unit in paddock-caddy.service paddockd.service paddock-engine.service; do
            if systemctl list-unit-files "$unit" >/dev/null 2>&1; then
                _do systemctl disable --now "$unit" || true
            fi
        done
        _remove /etc/systemd/system/paddock-caddy.service /etc/systemd/system/paddockd.service \
            /etc/systemd/system/paddock-engine.service /etc/systemd/system/lxcfs.service.d/paddock.conf
        _do systemctl daemon-reload
    else
        local supervisor
        supervisor=$(cat /run/paddock/supervise.pid 2>/dev/null || true)
        # The supervisor leads its process group: paddockd and Caddy go with it.
        if [ -n "$supervisor" ] && kill -0 "$supervisor" 2>/dev/null; then
            _do kill "$supervisor"
        fi
        if [ -x /usr/local/bin/paddockd ]; then _do paddockd engine stop || true; fi
        # paddockd started LXCFS: unmounting it ends that process.
        if mountpoint -q "$lxcfs_dir" 2>/dev/null && ! systemctl is-active -q lxcfs 2>/dev/null; then
            _do umount -l "$lxcfs_dir" || true
        fi
    fi

    step "Network (paddockd's nftables tables and bridges)"
    local family
    for family in inet bridge arp; do
        if nft list table "$family" paddock >/dev/null 2>&1; then
            _do nft delete table "$family" paddock
        fi
    done
    local link
    for link in "$bridge" "$build_bridge"; do
        if ip link show "$link" >/dev/null 2>&1; then _do ip link delete "$link"; fi
    done

    step "Boxes, snapshots and drives (the engine's data root)"
    # Mounts the engine left inside (containers' filesystems, boxes' disks) and the boxes'
    # run folders (tmpfs) first, deepest first; rm never crosses into a mount that remains.
    local inner
    while read -r inner; do
        _do umount -l "$inner" || true
    done < <(awk -v r="$data_root/" -v b="$boxes_dir/" 'index($5, r) == 1 || index($5, b) == 1 {print $5}' \
        /proc/self/mountinfo | sort -r)
    if mountpoint -q "$data_root" 2>/dev/null; then
        _do umount "$data_root" || _do umount -l "$data_root"
    fi
    _remove "$data_root" "$exec_root"
    if [ "$data_image" != - ]; then _remove "$data_image"; fi

    step "Programs and front door"
    _remove /usr/local/bin/paddock /usr/local/bin/paddockd "$PREFIX" /etc/paddock/Caddyfile \
        /run/paddock

    if $PURGE; then
        step "Data, settings, logs, the paddock user (--purge)"
        _remove /var/lib/paddock /var/lib/paddock-caddy /etc/paddock "$LOG_DIR" \
            /root/.config/paddock
        if id paddock >/dev/null 2>&1; then _do userdel paddock || true; fi
        local f
        for f in /etc/subuid /etc/subgid; do
            if grep -q '^paddock:' "$f" 2>/dev/null; then _do sed -i '/^paddock:/d' "$f"; fi
        done
    fi

    if $DRY; then
        echo
        echo "--dry-run: nothing was changed."
    else
        echo
        echo "Paddock is removed."
        $PURGE || echo "Kept: /var/lib/paddock, $CONFIG and $LOG_DIR (./install.sh --uninstall --purge removes them)."
    fi
}
