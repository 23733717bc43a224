/* net_bind.c — mt_net_bind_addr (net_bind.h): the listening socket of the env:// store on
 * MASTER_ADDR's own interface, or on every interface (IPv6 with IPv4 mapped where the host has
 * IPv6, else IPv4). */
#include "parallel/net_bind.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* every interface: IPv6 with IPv4 mapped where the host has IPv6, else IPv4 */
static int bind_wildcard(int port, int *out_fd) {
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, zero = 0;
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_addr = in6addr_any, .sin6_port = htons((uint16_t)port)};
        *out_fd = fd;
        return bind(fd, (struct sockaddr *)&a6, sizeof a6);
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY), .sin_port = htons((uint16_t)port)};
    *out_fd = fd;
    return bind(fd, (struct sockaddr *)&a4, sizeof a4);
}

static int is_loopback(const struct sockaddr *sa) {
    if (sa->sa_family == AF_INET) return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family != AF_INET6) return 0;
    const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
}

/* See net_bind.h. A host name that this machine resolves to loopback alone (Debian's 127.0.1.1 for its own
 * name) is served on every interface: other machines reach it by another address. */
int mt_net_bind_addr(const char *addr, int port, int *out_fd) {
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
                    *res = NULL;
    if (getaddrinfo(addr, port_s, &hints, &res) != 0 || !res) {
        errno = EADDRNOTAVAIL;
        return -1;
    }
    struct addrinfo numeric = hints, *nres = NULL;
    numeric.ai_flags |= AI_NUMERICHOST;
    int is_numeric = getaddrinfo(addr, port_s, &numeric, &nres) == 0;
    if (nres) freeaddrinfo(nres);
    int all_loopback = 1;
    for (struct addrinfo *a = res; a; a = a->ai_next) all_loopback &= is_loopback(a->ai_addr);
    if (!is_numeric && strcmp(addr, "localhost") != 0 && all_loopback) {
        freeaddrinfo(res);
        return bind_wildcard(port, out_fd);
    }
    int rc = -1, e = EADDRNOTAVAIL;
    for (struct addrinfo *a = res; a && rc != 0; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol), one = 1;
        if (fd < 0) continue;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        rc = bind(fd, a->ai_addr, a->ai_addrlen);
        if (rc == 0) {
            *out_fd = fd;
        } else {
            e = errno;
            close(fd);
        }
    }
    freeaddrinfo(res);
    if (rc != 0) {
        *out_fd = -1;
        errno = e;
    }
    return rc;
}
