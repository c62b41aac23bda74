# Layer: the desktop, started on demand by `paddock-desktop start` (paddockd runs it on the
# first desktop/screenshot/exec --desktop): TigerVNC's Xvnc on :1, listening only on a
# unix socket in /run/paddock/desktop (the host reaches it through the box's run folder),
# a minimal XFCE session, a D-Bus session bus, xdotool for computer use.
# dbus-x11 keeps apt from pulling in systemd; no recommends, no translations, manuals or
# package docs of these packages, and no downloaded .debs keep the layer small.
ARG FROM
FROM ${FROM}
RUN printf 'path-exclude=/usr/share/locale/*\npath-include=/usr/share/locale/locale.alias\npath-exclude=/usr/share/doc/*\npath-exclude=/usr/share/man/*\n' \
      > /etc/dpkg/dpkg.cfg.d/paddock-desktop-slim \
 && apt-get update \
 && apt-get install -y --no-install-recommends \
      tigervnc-standalone-server xfce4-session xfwm4 xfdesktop4 xfce4-panel \
      xfce4-terminal xfce4-settings xfconf dbus dbus-x11 xdotool x11-xserver-utils \
      fonts-dejavu-core \
 && rm /etc/dpkg/dpkg.cfg.d/paddock-desktop-slim \
 && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
COPY box/paddock-desktop /usr/local/bin/paddock-desktop
