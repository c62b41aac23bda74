# Layer: coding agents for user abc. Versions come from images/agents.json as build
# arguments. Node 22 (Claude Code needs >= 22; Debian 12 has 18) from the npm registry's
# `node` package, linked into /usr/local/bin so it comes first on PATH; Python agents in a
# venv of their own. Kimi is Moonshot's Kimi Code CLI from npm: the PyPI `kimi-cli` it
# replaces needs Python >= 3.12 and is no longer maintained.
ARG FROM
FROM ${FROM}
ARG NODE_VERSION
ARG NPM_PACKAGES
ARG PIP_PACKAGES
ARG AGENT_VERSIONS
# The host's extra CAs (a TLS-inspecting proxy's): Node and pip use their own stores
# unless told, so point them at the system's.
COPY ca/ /usr/local/share/ca-certificates/host/
RUN update-ca-certificates
ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt
RUN npm install -g --no-fund --no-audit --loglevel=error "node@${NODE_VERSION}" \
 && node --version \
 && npm cache clean --force
RUN npm install -g --no-fund --no-audit --loglevel=error ${NPM_PACKAGES} \
 && npm cache clean --force
RUN python3 -m venv /opt/paddock-agents \
 && /opt/paddock-agents/bin/pip install --no-cache-dir --quiet ${PIP_PACKAGES} \
 && ln -s /opt/paddock-agents/bin/prime /usr/local/bin/prime
LABEL paddock.agents=${AGENT_VERSIONS}
