# Layer: Docker inside the box (dockerd started by the box's supervisor).
# /var/lib/docker is a volume of its own per box: never part of a snapshot.
ARG FROM
FROM ${FROM}
RUN apt-get update \
 && apt-get install -y --no-install-recommends docker.io docker-compose iptables \
 && apt-get clean && rm -rf /var/lib/apt/lists/* \
 && usermod -aG docker abc
COPY box/services/dockerd /etc/paddock/services.d/dockerd
COPY box/docker-compose-plugin /usr/libexec/docker/cli-plugins/docker-compose
COPY box/docker-shim /usr/local/bin/docker
