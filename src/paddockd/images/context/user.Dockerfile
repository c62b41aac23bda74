# Layer: the box user `abc` (uid 1000, home /config, passwordless sudo) and the init.
ARG FROM
FROM ${FROM}
RUN useradd --uid 1000 --user-group --home-dir /config --create-home --shell /bin/bash abc \
 && echo 'abc ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/abc && chmod 0440 /etc/sudoers.d/abc \
 && mkdir -p /etc/paddock/boot.d /etc/paddock/services.d /run/paddock
COPY box/paddock-init /usr/local/sbin/paddock-init
COPY box/profile.sh /etc/profile.d/paddock.sh
WORKDIR /config
# tini reaps zombies and, with -g, passes signals to the whole process group.
ENTRYPOINT ["/usr/bin/tini", "-g", "--", "/usr/local/sbin/paddock-init"]
