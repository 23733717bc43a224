/* net_bind.h — binding a TCP listening socket to one address of this machine: the env:// store's
 * rule for MASTER_ADDR (bootstrap_env.c). Plain sockets; no mtrain state. */
#ifndef MT_NET_BIND_H
#define MT_NET_BIND_H

/* Binds a new stream socket (close-on-exec, SO_REUSEADDR) to `addr` (a name or a numeric address;
 * 0.0.0.0 or :: mean every interface) and `port`; *out_fd gets it. A host name that this machine
 * resolves to loopback alone (Debian's 127.0.1.1 for its own name) is bound on every interface:
 * other machines reach it by another address. Returns 0, or -1 with errno (EADDRNOTAVAIL: not an
 * address of this machine; *out_fd is then -1 or a socket the caller closes). */
int mt_net_bind_addr(const char *addr, int port, int *out_fd);

#endif
