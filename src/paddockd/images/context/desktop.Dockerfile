# Layer: the desktop, started on demand by `paddock-desktop start` (paddockd runs it on the
# first desktop/screenshot/exec --desktop): TigerVNC's Xvnc on :1, listening only on a
# unix socket in /run/paddock/desktop (the host reaches it through the box's run folder),
# a minimal XFCE session, a D-Bus session bus, xdotool for computer use.
# dbus-x11 keeps apt from pulling in systemd; no recommends keeps the layer small.
ARG FROM
FROM ${FROM}
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      tigervnc-standalone-server xfce4-session xfwm4 xfdesktop4 xfce4-panel \
      xfce4-terminal xfce4-settings xfconf dbus dbus-x11 xdotool x11-xserver-utils \
      fonts-dejavu-core \
 && rm -rf /var/lib/apt/lists/*
COPY box/paddock-desktop /usr/local/bin/paddock-desktop
