/* A TCP fault proxy between ZooKeeper clients and one server, driven from
 * a test through stdin/stdout (see zkt_proxy_start() in harness.h).
 *
 *   zkr-proxy HOST:PORT
 *
 * Listens on 127.0.0.1 at a free port and prints "port N" once listening;
 * forwards every accepted connection to HOST:PORT. Then reads commands,
 * one per line, and answers "ok" (or "error <why>") once each has taken
 * effect:
 *
 *   pass               forward normally (the default; ends blackhole and
 *                      delay). Connections that lost bytes while
 *                      blackholed are reset: their streams have a gap and
 *                      cannot go on, as after a real partition whose TCP
 *                      connection timed out.
 *   pass-delay MS      pass, then delay MS (no connection gets through
 *                      undelayed in between).
 *   blackhole          keep all sockets open, drop bytes both ways, for
 *                      existing and new connections. A side that closes is
 *                      not reported to the other side.
 *   reset              close every current connection with RST, both
 *                      sides; the mode is unchanged.
 *   delay MS           hold every forwarded chunk MS ms, both ways, in
 *                      order. A side that closes has what it sent
 *                      before delivered first (as TCP would), then the
 *                      other side sees the close.
 *   drop-create-reply  forward the next create request (create, create2,
 *                      createContainer, createTTL or multi), drop its
 *                      reply and reset that connection: the create is
 *                      applied, the client sees connection loss.
 *   drop-set-reply     the same for the next setData request.
 *   drop-set-request   the next setData request is not forwarded: the
 *                      stream is cut before it and the connection reset
 *                      (the client sees connection loss; nothing applied).
 *   drop-create-reply-blackhole
 *                      the same, but the reply and everything after it
 *                      are dropped as by blackhole (which this mode then
 *                      is, for every connection, until pass): the client
 *                      cannot come back to read the outcome.
 *   drop-get-reply-blackhole
 *                      the same for the next getData request (answered
 *                      by the server, its watch set there).
 *   fail-auth          the next answer to an authentication request
 *                      (xid -4, after zoo_add_auth) is replaced by one that
 *                      says ZAUTHFAILED, as a server that refuses the
 *                      credentials answers; what that server sends on
 *                      this connection afterwards is dropped (the client
 *                      closes it).
 *   reset-auth         the next answer to an authentication request is
 *                      dropped and its connection reset, as by a
 *                      connection lost after the handshake and before the
 *                      server's answer to the credentials (the client
 *                      sends them again on its next connection). Armed
 *                      with fail-auth, it takes the first answer.
 *   quit               exit (so does EOF on stdin).
 *
 * One thread, one poll loop. Framing of ZooKeeper's protocol: every
 * message is a 4-byte big-endian length and a body; the first message of
 * a connection each way is the connect request/response, without header;
 * later requests start with xid:int32 type:int32, replies with xid:int32
 * zxid:int64 err:int32. */
#define _DEFAULT_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 256
#define CHUNK 65536
#define MAX_QUEUED (4 << 20) /* stop reading a side beyond this backlog */

enum { C2S = 0, S2C = 1 };

struct chunk {
    struct chunk *next;
    int64_t due; /* monotonic ms when it may be written */
    size_t len, off;
    char data[];
};

/* Finds message boundaries in one direction of a stream and collects the
 * length prefix plus the start of each body: xid and type of a request,
 * xid of a reply. */
struct framer {
    long frames; /* messages started so far (1 = connect message) */
    unsigned char hdr[12];
    size_t hlen;   /* header bytes collected */
    size_t want;   /* header bytes to collect (0 = length unknown) */
    uint32_t left; /* body bytes after the header still to come */
};

struct dir {
    int from, to; /* indices into conn->fd */
    struct chunk *head, *tail;
    size_t queued;
    struct framer fr;
};

struct conn {
    int fd[2];      /* 0 client, 1 server; -1 once closed */
    int connecting; /* server connect in progress */
    int tainted;    /* bytes were dropped: the stream has a gap */
    int drop_armed; /* waiting for the reply with xid drop_xid */
    int32_t drop_xid;
    int reset_on_flush; /* reset once the S2C queue is written */
    int forge_auth;     /* the cut is at an auth answer: a refusal instead */
    int reset_auth;     /* the cut is at an auth answer: reset there */
    int mute_s2c;       /* what the server sends is dropped */
    int close_after;    /* one side closed: close once d[close_after] is
                           written (-1: no) */
    struct dir d[2];
};

static struct conn *conns[MAX_CONNS];
static int blackhole;
static int delay_ms;
static int drop_create_armed;   /* 1: a create's reply, 2: a setData's, 3: a
                                   setData request, 4: a delete's reply, 5:
                                   a create request, 6: a getData's reply */
static int drop_then_blackhole; /* the armed drop turns blackhole on */
static int fail_auth_armed;
static int reset_auth_armed;
static struct sockaddr_storage target;
static socklen_t target_len;

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void reply(const char *fmt, const char *arg)
{
    printf(fmt, arg);
    fflush(stdout);
}

static int set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);

    return fl == -1 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) == -1 ? -1 : 0;
}

static void close_fd(int *fd, int rst)
{
    if (*fd < 0)
        return;
    if (rst) {
        struct linger lg = {1, 0};

        setsockopt(*fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    close(*fd);
    *fd = -1;
}

static void free_queue(struct dir *d)
{
    while (d->head != NULL) {
        struct chunk *c = d->head;

        d->head = c->next;
        free(c);
    }
    d->tail = NULL;
    d->queued = 0;
}

static void conn_close(int i, int rst)
{
    struct conn *c = conns[i];

    close_fd(&c->fd[0], rst);
    close_fd(&c->fd[1], rst);
    free_queue(&c->d[C2S]);
    free_queue(&c->d[S2C]);
    free(c);
    conns[i] = NULL;
}

static int32_t be32(const unsigned char *p)
{
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
                     (uint32_t)p[2] << 8 | (uint32_t)p[3]);
}

static int is_create(int32_t type)
{
    return type == 1 || type == 15 || type == 19 || type == 21 || type == 14;
}

/* A message header is complete. Returns 1 if the stream must be cut at
 * the start of this message (the reply to drop). */
static int on_header(struct conn *c, int dir, const struct framer *f)
{
    if (dir == C2S && f->want == 12 &&
        ((drop_create_armed == 3 && be32(f->hdr + 8) == 5) ||
         (drop_create_armed == 5 && is_create(be32(f->hdr + 8))))) {
        drop_create_armed = 0;
        return 1; /* cut before the request: it never reaches the server */
    }
    if (dir == C2S && f->want == 12 && drop_create_armed &&
        (drop_create_armed == 2   ? be32(f->hdr + 8) == 5
         : drop_create_armed == 4 ? be32(f->hdr + 8) == 2
         : drop_create_armed == 6 ? be32(f->hdr + 8) == 4
                                  : is_create(be32(f->hdr + 8)))) {
        drop_create_armed = 0;
        c->drop_armed = 1;
        c->drop_xid = be32(f->hdr + 4);
    }
    if (dir == S2C && f->want == 8 && reset_auth_armed &&
        be32(f->hdr + 4) == -4) {
        reset_auth_armed = 0;
        c->reset_auth = 1;
        return 1;
    }
    if (dir == S2C && f->want == 8 && fail_auth_armed &&
        be32(f->hdr + 4) == -4) {
        fail_auth_armed = 0;
        c->forge_auth = 1;
        return 1;
    }
    return dir == S2C && f->want == 8 && c->drop_armed &&
           be32(f->hdr + 4) == c->drop_xid;
}

/* Scans buf (just read in direction dir) for messages. Returns the offset
 * at which the stream must be cut and the connection reset, or -1. A reply
 * whose first bytes came in an earlier read is cut at 0: the client then
 * has part of it, which it cannot use either. */
static long scan(struct conn *c, int dir, const unsigned char *buf, size_t n)
{
    struct framer *f = &c->d[dir].fr;
    size_t pos = 0;
    size_t start = 0;

    while (pos < n) {
        if (f->hlen < 4 || f->hlen < f->want) {
            if (f->hlen == 0)
                start = pos;
            f->hdr[f->hlen++] = buf[pos++];
            if (f->hlen == 4) {
                uint32_t len = (uint32_t)be32(f->hdr);
                uint32_t inspect = f->frames++ == 0 ? 0 : dir == C2S ? 8 : 4;

                if (inspect > len)
                    inspect = len;
                f->want = 4 + inspect;
                f->left = len - inspect;
            }
            if (f->hlen >= 4 && f->hlen == f->want) {
                if (on_header(c, dir, f))
                    return (long)start;
                if (f->left == 0)
                    f->hlen = f->want = 0;
            }
            continue;
        }
        {
            size_t take = n - pos < f->left ? n - pos : f->left;

            pos += take;
            f->left -= (uint32_t)take;
            if (f->left == 0)
                f->hlen = f->want = 0;
        }
    }
    return -1;
}

static void enqueue(struct dir *d, const char *buf, size_t n)
{
    struct chunk *c;

    if (n == 0)
        return;
    c = malloc(sizeof(*c) + n);
    if (c == NULL)
        return;
    memcpy(c->data, buf, n);
    c->len = n;
    c->off = 0;
    c->next = NULL;
    c->due = now_ms() + delay_ms;
    if (d->tail != NULL)
        d->tail->next = c;
    else
        d->head = c;
    d->tail = c;
    d->queued += n;
}

/* One side closed or failed. Returns 1 if the connection was freed. */
static int side_gone(int i, int side)
{
    struct conn *c = conns[i];

    if (blackhole) {
        /* A partition does not carry the close: keep the other side. */
        close_fd(&c->fd[side], 0);
        if (c->fd[0] < 0 && c->fd[1] < 0) {
            conn_close(i, 0);
            return 1;
        }
        return 0;
    }
    if (c->d[side == 0 ? C2S : S2C].head != NULL) {
        /* What that side sent before it closed still goes through (after
         * its delay), as over TCP: a client's close-session request, say;
         * then the other side sees the close. */
        close_fd(&c->fd[side], 0);
        free_queue(&c->d[side == 0 ? S2C : C2S]);
        c->close_after = side == 0 ? C2S : S2C;
        return 0;
    }
    conn_close(i, 1);
    return 1;
}

/* Reads from side; returns 1 if the connection was freed. */
static int do_read(int i, int side)
{
    struct conn *c = conns[i];
    int dir = side == 0 ? C2S : S2C;
    static char buf[CHUNK];
    ssize_t n = recv(c->fd[side], buf, sizeof(buf), 0);
    long cut;

    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
        return side_gone(i, side);
    if (n < 0)
        return 0;
    if (blackhole) {
        c->tainted = 1;
        return 0;
    }
    if (c->reset_on_flush || (dir == S2C && c->mute_s2c))
        return 0; /* about to be reset: nothing after the dropped reply */
    cut = scan(c, dir, (unsigned char *)buf, (size_t)n);
    if (cut >= 0 && c->forge_auth) {
        /* The auth answer's header (xid -4, zxid, err) says ZAUTHFAILED
         * (-115); the server's own answer and all after it are dropped. */
        static const char refused[20] = {0, 0, 0, 16, -1, -1, -1, -4, 0,  0,
                                         0, 0, 0, 0,  0,  0,  -1, -1, -1, -115};
        enqueue(&c->d[dir], buf, (size_t)cut);
        enqueue(&c->d[dir], refused, sizeof(refused));
        c->forge_auth = 0;
        c->mute_s2c = 1;
        return 0;
    }
    if (cut >= 0) {
        enqueue(&c->d[dir], buf, (size_t)cut);
        c->drop_armed = 0;
        if (drop_then_blackhole && !c->reset_auth) {
            drop_then_blackhole = 0;
            blackhole = 1;
            c->tainted = 1; /* reset at pass: its stream has a gap */
        } else {
            c->reset_on_flush = 1;
        }
        c->reset_auth = 0;
        return 0;
    }
    enqueue(&c->d[dir], buf, (size_t)n);
    return 0;
}

/* Writes due chunks towards side; returns 1 if the connection was freed. */
static int do_write(int i, int side)
{
    struct conn *c = conns[i];
    struct dir *d = &c->d[side == 1 ? C2S : S2C];
    int64_t now = now_ms();

    while (d->head != NULL && d->head->due <= now) {
        struct chunk *ch = d->head;
        ssize_t n = send(c->fd[side], ch->data + ch->off, ch->len - ch->off,
                         MSG_NOSIGNAL);

        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return 0;
            return side_gone(i, side);
        }
        ch->off += (size_t)n;
        d->queued -= (size_t)n;
        if (ch->off < ch->len)
            return 0;
        d->head = ch->next;
        if (d->head == NULL)
            d->tail = NULL;
        free(ch);
    }
    return 0;
}

static void accept_one(int lfd)
{
    int cfd = accept(lfd, NULL, NULL);
    int sfd;
    int one = 1;
    struct conn *c;
    int slot = -1;

    if (cfd < 0)
        return;
    for (int i = 0; i < MAX_CONNS && slot < 0; i++)
        if (conns[i] == NULL)
            slot = i;
    sfd = socket(target.ss_family, SOCK_STREAM, 0);
    c = calloc(1, sizeof(*c));
    if (slot < 0 || sfd < 0 || c == NULL || set_nonblock(cfd) != 0 ||
        set_nonblock(sfd) != 0) {
        free(c);
        close_fd(&cfd, 1);
        close_fd(&sfd, 0);
        return;
    }
    setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c->close_after = -1;
    c->fd[0] = cfd;
    c->fd[1] = sfd;
    if (connect(sfd, (struct sockaddr *)&target, target_len) == 0)
        c->connecting = 0;
    else if (errno == EINPROGRESS)
        c->connecting = 1;
    else {
        /* Target down: the client sees its connection reset. */
        free(c);
        close_fd(&cfd, 1);
        close_fd(&sfd, 0);
        return;
    }
    c->tainted = blackhole;
    conns[slot] = c;
}

static void reset_all(void)
{
    for (int i = 0; i < MAX_CONNS; i++)
        if (conns[i] != NULL)
            conn_close(i, 1);
}

static void do_command(char *line, int *quit)
{
    char *end = line + strlen(line);

    while (end > line && (end[-1] == '\r' || end[-1] == ' '))
        *--end = '\0';
    if (strcmp(line, "pass") == 0 || strncmp(line, "pass-delay ", 11) == 0) {
        char *e;
        long ms = line[4] == '\0' ? 0 : strtol(line + 11, &e, 10);

        if (line[4] != '\0' &&
            (*e != '\0' || e == line + 11 || ms < 0 || ms > 3600000)) {
            reply("error bad delay '%s'\n", line + 11);
            return;
        }
        blackhole = 0;
        delay_ms = (int)ms;
        for (int i = 0; i < MAX_CONNS; i++)
            if (conns[i] != NULL && (conns[i]->tainted || conns[i]->fd[0] < 0 ||
                                     conns[i]->fd[1] < 0))
                conn_close(i, 1);
    } else if (strcmp(line, "blackhole") == 0) {
        blackhole = 1;
        for (int i = 0; i < MAX_CONNS; i++) {
            if (conns[i] == NULL)
                continue;
            /* What is queued is dropped too. */
            if (conns[i]->d[C2S].queued > 0 || conns[i]->d[S2C].queued > 0)
                conns[i]->tainted = 1;
            free_queue(&conns[i]->d[C2S]);
            free_queue(&conns[i]->d[S2C]);
        }
    } else if (strcmp(line, "reset") == 0) {
        reset_all();
    } else if (strncmp(line, "delay ", 6) == 0) {
        char *e;
        long ms = strtol(line + 6, &e, 10);

        if (*e != '\0' || e == line + 6 || ms < 0 || ms > 3600000) {
            reply("error bad delay '%s'\n", line + 6);
            return;
        }
        delay_ms = (int)ms;
    } else if (strcmp(line, "drop-create-reply") == 0) {
        drop_create_armed = 1;
        drop_then_blackhole = 0;
    } else if (strcmp(line, "drop-set-reply") == 0) {
        drop_create_armed = 2;
        drop_then_blackhole = 0;
    } else if (strcmp(line, "drop-set-request") == 0) {
        drop_create_armed = 3;
        drop_then_blackhole = 0;
    } else if (strcmp(line, "drop-create-reply-blackhole") == 0) {
        drop_create_armed = 1;
        drop_then_blackhole = 1;
    } else if (strcmp(line, "drop-delete-reply-blackhole") == 0) {
        drop_create_armed = 4;
        drop_then_blackhole = 1;
    } else if (strcmp(line, "drop-delete-reply") == 0) {
        drop_create_armed = 4;
        drop_then_blackhole = 0;
    } else if (strcmp(line, "drop-create-request-blackhole") == 0) {
        drop_create_armed = 5;
        drop_then_blackhole = 1;
    } else if (strcmp(line, "drop-create-request") == 0) {
        drop_create_armed = 5;
        drop_then_blackhole = 0;
    } else if (strcmp(line, "drop-get-reply-blackhole") == 0) {
        drop_create_armed = 6;
        drop_then_blackhole = 1;
    } else if (strcmp(line, "fail-auth") == 0) {
        fail_auth_armed = 1;
    } else if (strcmp(line, "reset-auth") == 0) {
        reset_auth_armed = 1;
    } else if (strcmp(line, "quit") == 0) {
        *quit = 1;
        return;
    } else {
        reply("error unknown command '%s'\n", line);
        return;
    }
    reply("%s\n", "ok");
}

/* Reads stdin; runs complete lines. Returns 1 to quit. */
static int read_commands(void)
{
    static char buf[1024];
    static size_t len;
    ssize_t n = read(0, buf + len, sizeof(buf) - 1 - len);
    int quit = 0;
    char *nl;

    if (n <= 0)
        return n < 0 && (errno == EINTR || errno == EAGAIN) ? 0 : 1;
    len += (size_t)n;
    buf[len] = '\0';
    while (!quit && (nl = strchr(buf, '\n')) != NULL) {
        *nl = '\0';
        do_command(buf, &quit);
        len -= (size_t)(nl + 1 - buf);
        memmove(buf, nl + 1, len + 1);
    }
    if (len == sizeof(buf) - 1) {
        reply("%s\n", "error line too long");
        len = 0;
    }
    return quit;
}

static int parse_target(const char *arg)
{
    char host[256];
    const char *colon = strrchr(arg, ':');
    struct addrinfo hints, *res;
    size_t hl;

    if (colon == NULL || (hl = (size_t)(colon - arg)) >= sizeof(host))
        return -1;
    memcpy(host, arg, hl);
    host[hl] = '\0';
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, colon + 1, &hints, &res) != 0)
        return -1;
    memcpy(&target, res->ai_addr, res->ai_addrlen);
    target_len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

static int listen_loopback(void)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0)
        return -1;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(fd, 64) != 0 || set_nonblock(fd) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        close(fd);
        return -1;
    }
    printf("port %d\n", ntohs(sa.sin_port));
    fflush(stdout);
    return fd;
}

/* Adds the poll entries of connection i; map[k] = i*2+side. */
static void poll_conn(int i, struct pollfd *p, int *map, int *np,
                      int64_t *next_due)
{
    struct conn *c = conns[i];

    for (int side = 0; side < 2; side++) {
        struct dir *in = &c->d[side == 0 ? C2S : S2C];
        struct dir *out = &c->d[side == 0 ? S2C : C2S];
        short ev = 0;

        if (c->fd[side] < 0)
            continue;
        if (side == 1 && c->connecting) {
            ev = POLLOUT;
        } else {
            if (in->queued < MAX_QUEUED)
                ev |= POLLIN;
            if (out->head != NULL) {
                if (out->head->due <= now_ms())
                    ev |= POLLOUT;
                else if (*next_due < 0 || out->head->due < *next_due)
                    *next_due = out->head->due;
            }
        }
        p[*np].fd = c->fd[side];
        p[*np].events = ev;
        p[*np].revents = 0;
        map[(*np)++] = i * 2 + side;
    }
}

static void handle(int i, int side, short rev)
{
    struct conn *c = conns[i];

    if (c == NULL || c->fd[side] < 0)
        return;
    if (side == 1 && c->connecting) {
        int err = 0;
        socklen_t el = sizeof(err);

        if (!(rev & (POLLOUT | POLLERR | POLLHUP)))
            return;
        if (getsockopt(c->fd[1], SOL_SOCKET, SO_ERROR, &err, &el) != 0 ||
            err != 0) {
            conn_close(i, 1);
            return;
        }
        c->connecting = 0;
        return;
    }
    if ((rev & POLLOUT) && do_write(i, side))
        return;
    if (rev & (POLLIN | POLLHUP | POLLERR))
        do_read(i, side);
}

int main(int argc, char **argv)
{
    static struct pollfd p[2 + 2 * MAX_CONNS];
    static int map[2 + 2 * MAX_CONNS];
    int lfd;

    if (argc != 2 || parse_target(argv[1]) != 0) {
        fprintf(stderr, "usage: zkr-proxy HOST:PORT\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    lfd = listen_loopback();
    if (lfd < 0) {
        perror("zkr-proxy: listen");
        return 1;
    }
    for (;;) {
        int np = 2;
        int64_t next_due = -1;
        int timeout = -1;

        p[0] = (struct pollfd){0, POLLIN, 0};
        p[1] = (struct pollfd){lfd, POLLIN, 0};
        for (int i = 0; i < MAX_CONNS; i++)
            if (conns[i] != NULL)
                poll_conn(i, p, map, &np, &next_due);
        if (next_due >= 0) {
            int64_t left = next_due - now_ms();

            timeout = left < 0 ? 0 : (int)left;
        }
        if (poll(p, (nfds_t)np, timeout) < 0 && errno != EINTR)
            return 1;
        if (p[0].revents != 0) {
            if (read_commands())
                break;
            /* A command may have freed slots: poll afresh. */
            continue;
        }
        if (p[1].revents & POLLIN)
            accept_one(lfd);
        for (int k = 2; k < np; k++)
            if (p[k].revents != 0)
                handle(map[k] / 2, map[k] % 2, p[k].revents);
        /* A dropped reply: reset once what came before it is written. */
        for (int i = 0; i < MAX_CONNS; i++)
            if (conns[i] != NULL && conns[i]->reset_on_flush &&
                conns[i]->d[S2C].head == NULL)
                conn_close(i, 1);
            else if (conns[i] != NULL && conns[i]->close_after >= 0 &&
                     conns[i]->d[conns[i]->close_after].head == NULL)
                conn_close(i, 0);
    }
    reset_all();
    close(lfd);
    return 0;
}
