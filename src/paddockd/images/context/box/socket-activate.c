/* paddock-socket-activate PATH GROUP COMMAND [ARG...]
 *
 * Listens on the unix socket PATH (mode 0660, group GROUP) and waits, without accepting,
 * until a first client knocks; then becomes COMMAND (exec: same pid) with the socket
 * handed over the way systemd does it (fd 3, LISTEN_FDS=1, LISTEN_PID), so COMMAND
 * accepts that first client itself. The box's dockerd starts this way: an idle box
 * pays nothing for Docker (dockerd and containerd are ~110 MiB), and the first
 * `docker` command waits a second longer. Debian's systemd-socket-activate does the
 * same but needs systemd installed, and costs 6 MiB while it waits; this costs <1 MiB.
 */
#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int fail(const char *what) {
    fprintf(stderr, "paddock-socket-activate: %s: %s\n", what, strerror(errno));
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: paddock-socket-activate PATH GROUP COMMAND [ARG...]\n");
        return 2;
    }
    const char *path = argv[1];
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof addr.sun_path) {
        fprintf(stderr, "paddock-socket-activate: %s: path too long\n", path);
        return 2;
    }
    strcpy(addr.sun_path, path);
    struct group *group = getgrnam(argv[2]);
    if (group == NULL) {
        fprintf(stderr, "paddock-socket-activate: no group %s\n", argv[2]);
        return 2;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) return fail("socket");
    unlink(path);
    umask(0077); /* nobody may connect before the socket has its group */
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0) return fail(path);
    if (chown(path, 0, group->gr_gid) < 0 || chmod(path, 0660) < 0) return fail(path);
    umask(0022);
    if (listen(fd, SOMAXCONN) < 0) return fail("listen");
    struct pollfd knock = {.fd = fd, .events = POLLIN};
    while (poll(&knock, 1, -1) < 0)
        if (errno != EINTR) return fail("poll");
    if (fd != 3) {
        if (dup2(fd, 3) < 0) return fail("dup2");
        close(fd);
    }
    char pid[24];
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    setenv("LISTEN_FDS", "1", 1);
    setenv("LISTEN_PID", pid, 1);
    unsetenv("LISTEN_FDNAMES");
    execvp(argv[3], argv + 3);
    return fail(argv[3]);
}
