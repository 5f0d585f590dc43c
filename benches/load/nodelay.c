/* An LD_PRELOAD shim for the edge benchmark only (edge-bench --runtime spin-nodelay): sets
 * TCP_NODELAY on every socket accept() and accept4() return, which Spin 4.1.0-pre0 does not do
 * (docs/operating.md, "Keep-alive clients and Nagle's algorithm"). edge-bench builds it with
 * `cc -shared -fPIC -O2 -o libnodelay.so nodelay.c -ldl`; it is never shipped. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

static int with_nodelay(int fd) {
    int one = 1;
    if (fd >= 0) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* fails on non-TCP: fine */
    return fd;
}

int accept4(int fd, struct sockaddr *address, socklen_t *length, int flags) {
    static int (*real)(int, struct sockaddr *, socklen_t *, int);
    if (!real) real = (int (*)(int, struct sockaddr *, socklen_t *, int))dlsym(RTLD_NEXT, "accept4");
    return with_nodelay(real(fd, address, length, flags));
}

int accept(int fd, struct sockaddr *address, socklen_t *length) {
    static int (*real)(int, struct sockaddr *, socklen_t *);
    if (!real) real = (int (*)(int, struct sockaddr *, socklen_t *))dlsym(RTLD_NEXT, "accept");
    return with_nodelay(real(fd, address, length));
}
