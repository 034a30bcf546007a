/* The kernel's TCP socket table through netlink sock_diag, for placement_native.ports.
 *
 * One dump request asks for every TCP state of both address families, so listeners,
 * connections, time-wait sockets and (on kernels >= 6.9) bound-but-inactive sockets all
 * come back in a few recv() calls, without the per-line text formatting and parsing that
 * /proc/net/tcp costs. */
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
static int pn_send_dump_request(int fd, uint16_t type, uint32_t seq, const void *request,
                                size_t size)
{
    struct {
        struct nlmsghdr header;
        union {
            struct inet_diag_req legacy;
            struct inet_diag_req_v2 v2;
        } request;
    } message;
    struct sockaddr_nl kernel;
    size_t length = NLMSG_LENGTH(size);

    memset(&message, 0, sizeof message);
    message.header.nlmsg_len = (uint32_t)length;
    message.header.nlmsg_type = type;
    message.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    message.header.nlmsg_seq = seq;
    memcpy(&message.request, request, size);

    memset(&kernel, 0, sizeof kernel);
    kernel.nl_family = AF_NETLINK;
    for (;;) {
        ssize_t sent = sendto(fd, &message, length, 0, (struct sockaddr *)&kernel, sizeof kernel);
        if (sent == (ssize_t)length)
            return 0;
        if (sent < 0 && errno == EINTR)
            continue;
        return sent < 0 ? errno : EIO;
    }
}

/* Read one dump's replies until NLMSG_DONE, calling visit for each socket. */
static int pn_read_dump(int fd, uint16_t type, uint32_t seq, void *buffer, pn_visit visit,
                        void *ctx, size_t *visited)
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
            if (header->nlmsg_seq != seq)
                continue;
            if (header->nlmsg_type == NLMSG_DONE)
                return 0;
            if (header->nlmsg_type == NLMSG_ERROR) {
                const struct nlmsgerr *error = NLMSG_DATA(header);
                if (header->nlmsg_len < NLMSG_LENGTH(sizeof *error))
                    return EPROTO;
                return error->error < 0 ? -error->error : EPROTO;
            }
            if (header->nlmsg_type != type)
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
            ++*visited;
        }
    }
}

/* The TCPDIAG_GETSOCK request (struct inet_diag_req) reaches the same kernel dump as
 * SOCK_DIAG_BY_FAMILY with inet_diag_req_v2, but with the family left open, so ONE dump
 * returns IPv4 and IPv6 sockets. That halves the cost: every dump walks the whole
 * established hash (262144 buckets on a 24 GB machine), the listening hash and, for
 * bound-inactive sockets, the bind hash, however few sockets there are. Should a kernel
 * refuse it, one inet_diag_req_v2 dump per family gives the same table. */
static int pn_dump_both_families(int fd, void *buffer, pn_visit visit, void *ctx,
                                 size_t *visited)
{
    struct inet_diag_req request;
    memset(&request, 0, sizeof request);
    request.idiag_family = AF_INET;
    request.idiag_states = PN_ALL_TCP_STATES;
    int status = pn_send_dump_request(fd, TCPDIAG_GETSOCK, 1, &request, sizeof request);
    if (status == 0)
        status = pn_read_dump(fd, TCPDIAG_GETSOCK, 1, buffer, visit, ctx, visited);
    return status;
}

static int pn_dump_family(int fd, uint8_t family, void *buffer, pn_visit visit, void *ctx,
                          size_t *visited)
{
    struct inet_diag_req_v2 request;
    memset(&request, 0, sizeof request);
    request.sdiag_family = family;
    request.sdiag_protocol = IPPROTO_TCP;
    request.idiag_states = PN_ALL_TCP_STATES;
    uint32_t seq = 2u + family;
    int status = pn_send_dump_request(fd, SOCK_DIAG_BY_FAMILY, seq, &request, sizeof request);
    if (status == 0)
        status = pn_read_dump(fd, SOCK_DIAG_BY_FAMILY, seq, buffer, visit, ctx, visited);
    return status;
}

static int pn_walk_tcp_sockets(int per_family, pn_visit visit, void *ctx)
{
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0)
        return errno;
    /* malloc'ed memory is aligned as the netlink macros expect */
    void *buffer = malloc(PN_RECV_BUFFER);
    size_t visited = 0;
    int status = buffer == NULL ? ENOMEM : EINVAL;
    if (buffer != NULL && !per_family)
        status = pn_dump_both_families(fd, buffer, visit, ctx, &visited);
    if (status != 0 && status != ENOMEM && visited == 0) {
        status = pn_dump_family(fd, AF_INET, buffer, visit, ctx, &visited);
        if (status == 0)
            status = pn_dump_family(fd, AF_INET6, buffer, visit, ctx, &visited);
    }
    free(buffer);
    close(fd);
    return status;
}
#else
static int pn_walk_tcp_sockets(int per_family, pn_visit visit, void *ctx)
{
    (void)per_family;
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

int pn_tcp_socket_table(int per_family, pn_tcp_socket **out, size_t *count)
{
    pn_table_builder table = {NULL, 0, 0};
    int status = pn_walk_tcp_sockets(per_family, pn_append, &table);
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
    int status = pn_walk_tcp_sockets(0, pn_mark_busy, &busy);
    *sockets_seen = busy.seen;
    return status;
}
