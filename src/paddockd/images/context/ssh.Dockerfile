# Layer: OpenSSH's server, for `paddock ssh` and editors' remote-SSH (and E2B's
# /home/user). sshd never listens: each session is one `sshd -i` that paddockd starts in
# the box over an exec (a tunnel through the API), with the box's own host key (made by
# paddockd, never the image's: the keys a package install makes would be every box's) and
# the caller's public keys, both written to /run/paddock/ssh for that session. So an idle
# box pays nothing for it, and no port of any box, on any network, answers SSH.
ARG FROM
FROM ${FROM}
RUN apt-get update \
 && apt-get install -y --no-install-recommends openssh-server \
 && apt-get clean \
 && rm -f /etc/ssh/ssh_host_*
# A password of "*" is no password, but not a locked account (which sshd refuses without
# PAM): keys are the only way in.
RUN usermod -p '*' abc && usermod -p '*' root
# Code written for E2B's sandboxes expects its user `user`, home /home/user: the box
# user under that name too (uid and gid 1000, after abc's entries, so abc stays the name
# shown), and its home under that path (E2B's API maps its user `user` to abc).
RUN mkdir -p /home && ln -sfn /config /home/user \
 && groupadd --non-unique --gid 1000 user \
 && useradd --non-unique --uid 1000 --gid 1000 --no-create-home --home-dir /home/user \
      --shell /bin/bash --password '*' user
