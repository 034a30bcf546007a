/* The kernel's TCP socket table through netlink sock_diag, for placement_native.ports.
 *
 * One netlink socket carries one dump request per address family (IPv4, IPv6) asking for
 * every TCP state, so listeners, connections, time-wait sockets and (on kernels >= 6.9)
 * bound-but-inactive sockets all come back in a few recv() calls, without the per-line text
 * formatting and parsing that /proc/net/tcp costs. */
#include "ports.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#ifdef __linux__
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#endif

/* Every TCP state, including TCP_BOUND_INACTIVE (13), which kernels before 6.9 ignore. */
#ifndef PN_ALL_TCP_STATES
#define PN_ALL_TCP_STATES 0xFFFFFFFFu
#endif
#define PN_RECV_BUFFER (64 * 1024)

typedef int (*pn_visit)(void *ctx, const pn_tcp_socket *sock);

#ifdef __linux__
static int pn_send_dump_request(int fd, uint8_t family)
{
    struct {
        struct nlmsghdr header;
        struct inet_diag_req_v2 request;
    } message;
    struct sockaddr_nl kernel;

    memset(&message, 0, sizeof message);
    message.header.nlmsg_len = sizeof message;
    message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    message.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    message.header.nlmsg_seq = family;
    message.request.sdiag_family = family;
    message.request.sdiag_protocol = IPPROTO_TCP;
    message.request.idiag_states = PN_ALL_TCP_STATES;

    memset(&kernel, 0, sizeof kernel);
    kernel.nl_family = AF_NETLINK;
    for (;;) {
        ssize_t sent = sendto(fd, &message, sizeof message, 0, (struct sockaddr *)&kernel,
                              sizeof kernel);
        if (sent == (ssize_t)sizeof message)
            return 0;
        if (sent < 0 && errno == EINTR)
            continue;
        return sent < 0 ? errno : EIO;
    }
}

/* Read one dump's replies until NLMSG_DONE, calling visit for each socket. */
static int pn_read_dump(int fd, uint8_t family, void *buffer, pn_visit visit, void *ctx)
{
    for (;;) {
        ssize_t received = recv(fd, buffer, PN_RECV_BUFFER, 0);
        if (received < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (received == 0)
            return EPROTO;
        int left = (int)received;
        for (struct nlmsghdr *header = buffer; NLMSG_OK(header, left);
             header = NLMSG_NEXT(header, left)) {
            if (header->nlmsg_seq != family)
                continue;
            if (header->nlmsg_type == NLMSG_DONE)
                return 0;
            if (header->nlmsg_type == NLMSG_ERROR) {
                const struct nlmsgerr *error = NLMSG_DATA(header);
                if (header->nlmsg_len < NLMSG_LENGTH(sizeof *error))
                    return EPROTO;
                return error->error < 0 ? -error->error : EPROTO;
            }
            if (header->nlmsg_type != SOCK_DIAG_BY_FAMILY)
                continue;
            if (header->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
                return EPROTO;
            const struct inet_diag_msg *msg = NLMSG_DATA(header);
            pn_tcp_socket sock;
            memset(&sock, 0, sizeof sock);
            sock.family = msg->idiag_family;
            sock.state = msg->idiag_state;
            sock.port = ntohs(msg->id.idiag_sport);
            sock.inode = msg->idiag_inode;
            memcpy(sock.addr, msg->id.idiag_src, msg->idiag_family == AF_INET ? 4 : 16);
            int status = visit(ctx, &sock);
            if (status != 0)
                return status;
        }
    }
}

static int pn_walk_tcp_sockets(pn_visit visit, void *ctx)
{
    static const uint8_t families[] = {AF_INET, AF_INET6};
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0)
        return errno;
    /* long-aligned, as the netlink macros expect */
    void *buffer = malloc(PN_RECV_BUFFER);
    int status = buffer == NULL ? ENOMEM : 0;
    for (size_t i = 0; status == 0 && i < sizeof families; i++) {
        status = pn_send_dump_request(fd, families[i]);
        if (status == 0)
            status = pn_read_dump(fd, families[i], buffer, visit, ctx);
    }
    free(buffer);
    close(fd);
    return status;
}
#else
static int pn_walk_tcp_sockets(pn_visit visit, void *ctx)
{
    (void)visit;
    (void)ctx;
    return ENOSYS;
}
#endif

typedef struct {
    pn_tcp_socket *items;
    size_t count;
    size_t capacity;
} pn_table_builder;

static int pn_append(void *ctx, const pn_tcp_socket *sock)
{
    pn_table_builder *table = ctx;
    if (table->count == table->capacity) {
        size_t capacity = table->capacity ? table->capacity * 2 : 256;
        pn_tcp_socket *items = realloc(table->items, capacity * sizeof *items);
        if (items == NULL)
            return ENOMEM;
        table->items = items;
        table->capacity = capacity;
    }
    table->items[table->count++] = *sock;
    return 0;
}

int pn_tcp_socket_table(pn_tcp_socket **out, size_t *count)
{
    pn_table_builder table = {NULL, 0, 0};
    int status = pn_walk_tcp_sockets(pn_append, &table);
    if (status != 0) {
        free(table.items);
        *out = NULL;
        *count = 0;
        return status;
    }
    *out = table.items;
    *count = table.count;
    return 0;
}

void pn_tcp_socket_table_free(pn_tcp_socket *table)
{
    free(table);
}

/* An IPv4 address as an IPv6 socket may carry it: ::ffff:a.b.c.d */
static int pn_is_v4_mapped(const uint8_t *addr)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(addr, prefix, sizeof prefix) == 0;
}

static int pn_is_zero(const uint8_t *addr, size_t size)
{
    for (size_t i = 0; i < size; i++)
        if (addr[i] != 0)
            return 0;
    return 1;
}

/* An address reduced to the family the kernel compares it in. */
typedef struct {
    int v6;
    int wildcard;
    const uint8_t *bytes;
} pn_address;

static pn_address pn_normalise(int family, const uint8_t *addr)
{
    pn_address result;
    if (family == AF_INET6 && pn_is_v4_mapped(addr)) {
        result.v6 = 0;
        result.bytes = addr + 12;
    } else {
        result.v6 = family == AF_INET6;
        result.bytes = addr;
    }
    result.wildcard = pn_is_zero(result.bytes, result.v6 ? 16 : 4);
    return result;
}

/* Whether a socket bound to `held` stops a bind to `wanted` on the same port. Conservative
 * where the table cannot tell: an IPv6 wildcard socket is taken to be dual-stack (the table
 * read from /proc does not show IPV6_V6ONLY), and binding the IPv6 wildcard clashes with
 * every IPv4 socket. Both readers apply the same rule (see _socket_table.conflicts). */
static int pn_conflicts(pn_address wanted, pn_address held)
{
    if (wanted.v6 == held.v6)
        return wanted.wildcard || held.wildcard ||
               memcmp(wanted.bytes, held.bytes, wanted.v6 ? 16 : 4) == 0;
    if (held.v6)
        return held.wildcard;
    return wanted.wildcard;
}

typedef struct {
    pn_address wanted;
    unsigned lo;
    unsigned hi;
    uint8_t *map;
    size_t seen;
} pn_busy_builder;

static int pn_mark_busy(void *ctx, const pn_tcp_socket *sock)
{
    pn_busy_builder *busy = ctx;
    busy->seen++;
    if (sock->port < busy->lo || sock->port > busy->hi || busy->map[sock->port - busy->lo])
        return 0;
    if (pn_conflicts(busy->wanted, pn_normalise(sock->family, sock->addr)))
        busy->map[sock->port - busy->lo] = 1;
    return 0;
}

int pn_tcp_busy_map(int family, const uint8_t *addr, unsigned lo, unsigned hi, uint8_t *map,
                    size_t *sockets_seen)
{
    *sockets_seen = 0;
    if (lo > hi || hi > 65535)
        return EINVAL;
    if (family != AF_INET && family != AF_INET6)
        return EAFNOSUPPORT;
    pn_busy_builder busy = {pn_normalise(family, addr), lo, hi, map, 0};
    int status = pn_walk_tcp_sockets(pn_mark_busy, &busy);
    *sockets_seen = busy.seen;
    return status;
}
