# Layer: Docker inside the box (dockerd started by the box's supervisor on first use).
# /var/lib/docker is a volume of its own per box: never part of a snapshot.
ARG FROM
FROM ${FROM}
RUN apt-get update \
 && apt-get install -y --no-install-recommends docker.io docker-compose iptables \
 && apt-get clean && rm -rf /var/lib/apt/lists/* \
 && usermod -aG docker abc
COPY box/socket-activate.c /tmp/socket-activate.c
RUN cc -O2 -Wall -Werror -o /usr/local/sbin/paddock-socket-activate /tmp/socket-activate.c \
 && rm /tmp/socket-activate.c
COPY box/services/dockerd /etc/paddock/services.d/dockerd
COPY box/docker-compose-plugin /usr/libexec/docker/cli-plugins/docker-compose
COPY box/docker-shim /usr/local/bin/docker
