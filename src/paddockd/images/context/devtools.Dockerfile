# Layer: the tools a coding agent expects on any Linux computer.
ARG FROM
FROM ${FROM}
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 LC_ALL=C.UTF-8
# Downloaded .debs are not kept (here, in later layers, and for the box user's installs):
# they doubled the image's size for nothing.
RUN echo 'APT::Keep-Downloaded-Packages "false";' > /etc/apt/apt.conf.d/10paddock-no-cache \
 && apt-get update \
 && apt-get install -y --no-install-recommends \
      git curl wget ca-certificates gnupg build-essential pkg-config \
      python3 python3-venv python3-pip python-is-python3 nodejs npm \
      sudo jq unzip zip xz-utils procps psmisc less vim-tiny nano file tree \
      openssh-client rsync iproute2 iputils-ping dnsutils netcat-openbsd \
      busybox-static tini tzdata \
 && apt-get clean && rm -rf /var/lib/apt/lists/*
