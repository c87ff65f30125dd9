/* LD_PRELOAD shim for dplace's local TensorFlow workers: TensorFlow's gRPC server binds "0.0.0.0:PORT"
 * (hard-coded in grpc_server_lib.cc), i.e. every interface. This bind() turns a wildcard address into
 * loopback: 0.0.0.0 -> 127.0.0.1, :: -> ::ffff:127.0.0.1 on a dual-stack socket (::1 when IPv6-only),
 * so nothing a worker opens listens beyond this machine. Every other bind() is passed through. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
    static bind_fn real = 0;
    if (!real) real = (bind_fn)dlsym(RTLD_NEXT, "bind");
    if (addr && addr->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        struct sockaddr_in a;
        memcpy(&a, addr, sizeof a);
        if (a.sin_addr.s_addr == htonl(INADDR_ANY)) {
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            return real(fd, (const struct sockaddr *)&a, sizeof a);
        }
    } else if (addr && addr->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 a;
        memcpy(&a, addr, sizeof a);
        if (IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr)) {
            int v6only = 0;
            socklen_t n = sizeof v6only;
            if (getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &n) == 0 && !v6only) {
                memset(&a.sin6_addr, 0, sizeof a.sin6_addr); /* ::ffff:127.0.0.1 */
                a.sin6_addr.s6_addr[10] = 0xff;
                a.sin6_addr.s6_addr[11] = 0xff;
                a.sin6_addr.s6_addr[12] = 127;
                a.sin6_addr.s6_addr[15] = 1;
            } else {
                a.sin6_addr = in6addr_loopback;
            }
            return real(fd, (const struct sockaddr *)&a, sizeof a);
        }
    }
    return real(fd, addr, len);
}
