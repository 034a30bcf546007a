/* Kernel TCP socket table for placement_native.ports (netlink sock_diag). */
#ifndef PLACEMENT_NATIVE_PORTS_H
#define PLACEMENT_NATIVE_PORTS_H

#include <stddef.h>
#include <stdint.h>

/* One TCP socket of the kernel's table, as inet_diag reports it. */
typedef struct {
    uint8_t family;   /* AF_INET (2) or AF_INET6 (10) */
    uint8_t state;    /* TCP state: 1 ESTABLISHED ... 10 LISTEN, 12 NEW_SYN_RECV, 13 BOUND_INACTIVE */
    uint16_t port;    /* local port, host byte order */
    uint32_t inode;   /* socket inode, 0 for request and time-wait sockets */
    uint8_t addr[16]; /* local address, network byte order; IPv4 uses the first 4 bytes */
} pn_tcp_socket;

/* Dump every TCP socket (IPv4 and IPv6, every state) with one netlink socket: one
 * TCPDIAG_GETSOCK dump for both families, or, if the kernel refuses it or per_family is
 * set, one SOCK_DIAG_BY_FAMILY (inet_diag_req_v2) dump per family. On success returns 0 and stores a malloc'ed array in *out (free it with
 * pn_tcp_socket_table_free) and its length in *count; otherwise returns a positive errno. */
int pn_tcp_socket_table(int per_family, pn_tcp_socket **out, size_t *count);
void pn_tcp_socket_table_free(pn_tcp_socket *table);

/* Mark the ports of [lo, hi] that a socket of the table holds in a way that conflicts with
 * binding (family, addr): map[port - lo] becomes 1 where it was 0 (other values are kept, so
 * the caller can pre-mark excluded ports). *sockets_seen receives the size of the table.
 * Returns 0 or a positive errno. */
int pn_tcp_busy_map(int family, const uint8_t *addr, unsigned lo, unsigned hi, uint8_t *map,
                    size_t *sockets_seen);

#endif
