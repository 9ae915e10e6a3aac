/* Long streams at scale, both ends: a model-like SSE upstream and a load generator.
 *
 *   streamload upstream PORT
 *   streamload client PORT PATH MODEL KEY STREAMS SECONDS SEED
 *
 * The upstream answers any POST with an OpenAI chat-completion stream paced as its
 * body asks ("ttft=MS rate=TOKENS_PER_S tokens=N" anywhere in it), then closes.
 * The client holds STREAMS streams open against PORT for SECONDS, each asking for a
 * random plan (first token after 200-500 ms, 30-80 tokens/s, 200-1000 tokens), and
 * prints one JSON line: streams done, errors, events, and what was added to the plan:
 * time to first event and the delay between events (p50, p99, max), and its own CPU.
 * With FIXED (a tenth argument, "fixed"), every stream asks the same plan (first token
 * after 300 ms, 50 tokens/s, 200 tokens: 4.3 s alone), the STREAMS open once over the
 * ramp and are not replaced, and the client waits (SECONDS at most) for all of them to
 * end, reporting each stream's whole time (p50, p99, max): how alike they are slowed.
 * Compiled by bench/long_streams.py; one epoll loop each, so neither is the bottleneck.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXFD 65536
#define RAMP_S 3
#define BUF 16384

static long long now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

static void nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

static int plan_value(const char *body, const char *name, int fallback) {
    const char *at = strstr(body, name);
    return at ? atoi(at + strlen(name)) : fallback;
}

/* ---- a min-heap of (due, fd) timers ------------------------------------------- */
typedef struct { long long due; int fd, gen; } Timer;
static Timer heap[MAXFD * 2];
static int heap_n;

static void heap_push(long long due, int fd, int gen) {
    int i = heap_n++;
    while (i > 0 && heap[(i - 1) / 2].due > due) { heap[i] = heap[(i - 1) / 2]; i = (i - 1) / 2; }
    heap[i].due = due; heap[i].fd = fd; heap[i].gen = gen;
}

static Timer heap_pop(void) {
    Timer top = heap[0], last = heap[--heap_n];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= heap_n) break;
        if (c + 1 < heap_n && heap[c + 1].due < heap[c].due) c++;
        if (heap[c].due >= last.due) break;
        heap[i] = heap[c]; i = c;
    }
    heap[i] = last;
    return top;
}

/* ---- the upstream ---------------------------------------------------------------- */
/* `gen` counts the streams an fd has carried: a timer of an earlier one is stale. */
typedef struct { int used, sent, tokens, live, keep, gen; long long interval_us; char in[BUF]; } Up;
static Up up[MAXFD];

/* Chunked and kept alive, as a provider's API answers. */
static const char HEAD[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                           "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n";
#define CHUNK_HEAD "data: {\"id\":\"chatcmpl-up\",\"object\":\"chat.completion.chunk\"," \
                   "\"created\":1767225600,\"model\":\"up\",\"choices\":[{\"index\":0,"

static void up_close(int ep, int fd) {
    epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
    close(fd);
    up[fd].live = 0;
    up[fd].gen++;
}

static void up_send(int ep, int fd) {
    Up *s = &up[fd];
    char out[640], *body = out + 8;  /* room for the chunk's size line */
    int n;
    if (s->sent == 0)
        n = snprintf(body, 600, CHUNK_HEAD "\"delta\":{\"role\":\"assistant\",\"content\":\" w0\"},"
                     "\"finish_reason\":null}]}\n\n");
    else if (s->sent < s->tokens)
        n = snprintf(body, 600, CHUNK_HEAD "\"delta\":{\"content\":\" w%d\"},\"finish_reason\":null}]}\n\n",
                     s->sent);  /* distinct tokens: a proxy may refuse a model that repeats */
    else
        n = snprintf(body, 600, CHUNK_HEAD "\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
                     "data: {\"id\":\"chatcmpl-up\",\"object\":\"chat.completion.chunk\",\"created\":1767225600,"
                     "\"model\":\"up\",\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":%d,"
                     "\"total_tokens\":%d}}\n\ndata: [DONE]\n\n", s->tokens, s->tokens + 12);
    char size[8];
    int k = snprintf(size, sizeof size, "%x\r\n", n);
    memcpy(body - k, size, k);
    memcpy(body + n, "\r\n", 2);
    n += k + 2;
    int last = s->sent++ >= s->tokens;
    if (last) { memcpy(body - k + n, "0\r\n\r\n", 5); n += 5; }
    if (write(fd, body - k, n) != n) { up_close(ep, fd); return; }
    if (!last) { heap_push(now_us() + s->interval_us, fd, s->gen); return; }
    if (!s->keep) { up_close(ep, fd); return; }
    s->used = s->sent = s->tokens = 0;  /* ready for the connection's next request */
    s->gen++;
}

static void up_read(int ep, int fd) {
    Up *s = &up[fd];
    for (;;) {
        ssize_t r = read(fd, s->in + s->used, BUF - 1 - s->used);
        if (r == 0 || (r < 0 && errno != EAGAIN)) { up_close(ep, fd); return; }
        if (r < 0) return;
        s->used += r;
        s->in[s->used] = 0;
        char *end = strstr(s->in, "\r\n\r\n");
        if (!end || s->tokens) continue;
        int length = plan_value(s->in, "Content-Length: ", plan_value(s->in, "content-length: ", 0));
        if (s->used < (end - s->in) + 4 + length) continue;
        s->keep = !strcasestr(s->in, "connection: close");
        int ttft = plan_value(end, "ttft=", 300), rate = plan_value(end, "rate=", 50);
        s->tokens = plan_value(end, "tokens=", 200);
        s->interval_us = 1000000LL / (rate > 0 ? rate : 50);
        if (write(fd, HEAD, sizeof HEAD - 1) < 0) { up_close(ep, fd); return; }
        heap_push(now_us() + ttft * 1000LL, fd, s->gen);
        return;
    }
}

static int upstream(int port) {
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(0x7f000001)};
    if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 4096)) { perror("listen"); return 1; }
    nonblocking(ls);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = ls}, evs[256];
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
    for (;;) {
        long long now = now_us();
        while (heap_n && heap[0].due <= now) {
            Timer t = heap_pop();
            if (up[t.fd].live && up[t.fd].gen == t.gen) up_send(ep, t.fd);
        }
        long long wait_us = heap_n ? heap[0].due - now : 1000000;
        struct timespec wait = {.tv_sec = wait_us / 1000000, .tv_nsec = wait_us % 1000000 * 1000};
        int n = epoll_pwait2(ep, evs, 256, &wait, NULL);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == ls) {
                int c;
                while ((c = accept4(ls, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    if (c >= MAXFD) { close(c); continue; }
                    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    int gen = up[c].gen;
                    memset(&up[c], 0, sizeof up[c]);
                    up[c].live = 1;
                    up[c].gen = gen + 1;
                    struct epoll_event ce = {.events = EPOLLIN, .data.fd = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce);
                }
            } else if (up[fd].live) {
                up_read(ep, fd);
            }
        }
    }
}

/* ---- the client ------------------------------------------------------------------ */
typedef struct {
    int live, events, status_seen, unsent;
    long long start, last, ttft_plan_us, interval_us;
    char tail[8], request[1024];
} Cl;
static Cl cl[MAXFD];

/* Added delays, in 0.1 ms buckets up to 60 s. */
#define BUCKETS 600000
static long long ttft_hist[BUCKETS], gap_hist[BUCKETS], whole_hist[BUCKETS];
static long long whole_n, whole_max;
static int fixed_;
static long long ttft_n, gap_n, ttft_max, gap_max, done_n, errors_n, events_n;
static long long why[4];  /* errors: not 200, closed early, read failed, write failed */

static void record(long long *hist, long long *n, long long *max, long long added_us) {
    if (added_us < 0) added_us = 0;
    long long b = added_us / 100;
    if (b >= BUCKETS) b = BUCKETS - 1;
    hist[b]++; (*n)++;
    if (added_us > *max) *max = added_us;
}

static double pct(long long *hist, long long n, double p) {
    long long want = (long long)(n * p), seen = 0;
    for (int b = 0; b < BUCKETS; b++) { seen += hist[b]; if (seen > want) return b / 10.0; }
    return 0;
}

static int port_, streams_;
static const char *path_, *model_, *key_;
static unsigned seed_;

static int cl_open(int ep) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
    if (fd < 0 || fd >= MAXFD) { if (fd >= 0) close(fd); return -1; }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port_), .sin_addr.s_addr = htonl(0x7f000001)};
    connect(fd, (struct sockaddr *)&a, sizeof a);
    int ttft = 200 + rand_r(&seed_) % 301, rate = 30 + rand_r(&seed_) % 51, tokens = 200 + rand_r(&seed_) % 801;
    if (fixed_) { ttft = 300; rate = 50; tokens = 200; }
    char body[512];
    int bn = snprintf(body, sizeof body, "{\"model\":\"%s\",\"stream\":true,\"messages\":[{\"role\":\"user\","
                      "\"content\":\"ttft=%d rate=%d tokens=%d\"}]}", model_, ttft, rate, tokens);
    Cl *c = &cl[fd];
    memset(c, 0, sizeof *c);
    c->unsent = snprintf(c->request, sizeof c->request, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      "Authorization: Bearer %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
                      path_, key_, bn, body);
    c->live = 1; c->start = now_us(); c->ttft_plan_us = ttft * 1000LL; c->interval_us = 1000000LL / rate;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.fd = fd};
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    /* The request fits a fresh socket's buffer: sent once the connection is up. */
    return fd;
}

static void cl_end(int ep, int fd, int error) {
    epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
    close(fd);
    cl[fd].live = 0;
    if (error) { errors_n++; why[error - 1]++; return; }
    done_n++;
    record(whole_hist, &whole_n, &whole_max, now_us() - cl[fd].start);
}

static void cl_event(Cl *c, long long t) {
    events_n++;
    if (c->events++ == 0) record(ttft_hist, &ttft_n, &ttft_max, t - c->start - c->ttft_plan_us);
    else record(gap_hist, &gap_n, &gap_max, t - c->last - c->interval_us);
    c->last = t;
}

static void cl_read(int ep, int fd) {
    Cl *c = &cl[fd];
    char buf[BUF + 8];
    for (;;) {
        memcpy(buf, c->tail, 7);
        ssize_t r = read(fd, buf + 7, BUF);
        if (r == 0) { cl_end(ep, fd, 2); return; }  /* closed before [DONE] */
        if (r < 0) { if (errno != EAGAIN) cl_end(ep, fd, 3); return; }
        buf[7 + r] = 0;
        if (!c->status_seen) {
            if (strncmp(buf + 7, "HTTP/1.1 200", 12) != 0) { cl_end(ep, fd, 1); return; }
            c->status_seen = 1;
        }
        long long t = now_us();
        /* Count "data: {" events; the tail keeps a marker split across reads. */
        for (char *p = buf; (p = memmem(p, buf + 7 + r - p, "data: {", 7)); p += 7)
            if (p + 7 > buf + 7) cl_event(c, t);
        if (memmem(buf, 7 + r, "data: [DONE]", 12)) { cl_end(ep, fd, 0); return; }
        memcpy(c->tail, buf + r, 7);
    }
}

static int client(int argc, char **argv) {
    port_ = atoi(argv[2]); path_ = argv[3]; model_ = argv[4]; key_ = argv[5];
    streams_ = atoi(argv[6]);
    double seconds = atof(argv[7]);
    seed_ = (unsigned)atoi(argv[8]);
    int ep = epoll_create1(0), opened = 0;
    long long begin = now_us(), end = begin + (long long)(seconds * 1e6);
    struct epoll_event evs[512];
    while (now_us() < end && !(fixed_ && opened == streams_ && done_n + errors_n == streams_)) {
        /* Streams open evenly over the first RAMP_S, not in one burst. */
        long long due = (now_us() - begin) * streams_ / (RAMP_S * 1000000LL);
        for (; opened < streams_ && opened <= due; opened++) cl_open(ep);
        int n = epoll_wait(ep, evs, 512, 5);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (!cl[fd].live) continue;
            if ((evs[i].events & EPOLLOUT) && cl[fd].unsent) {
                if (write(fd, cl[fd].request, cl[fd].unsent) != cl[fd].unsent) { cl_end(ep, fd, 4); if (!fixed_) cl_open(ep); continue; }
                cl[fd].unsent = 0;
                struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
                epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
            }
            if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                cl_read(ep, fd);
                if (!cl[fd].live && !fixed_) cl_open(ep);  /* keep STREAMS open */
            }
        }
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    printf("{\"done\": %lld, \"errors\": %lld, \"events\": %lld, \"first_events\": %lld, "
           "\"ttft_added_ms\": [%.1f, %.1f, %.1f], \"gap_added_ms\": [%.1f, %.1f, %.1f], \"cpu_s\": %.3f, "
           "\"stream_ms\": [%.1f, %.1f, %.1f], \"unfinished\": %lld, "
           "\"errors_by_kind\": {\"status\": %lld, \"closed\": %lld, \"read\": %lld, \"write\": %lld}}\n",
           done_n, errors_n, events_n, ttft_n, pct(ttft_hist, ttft_n, 0.5), pct(ttft_hist, ttft_n, 0.99),
           ttft_max / 1000.0, pct(gap_hist, gap_n, 0.5), pct(gap_hist, gap_n, 0.99), gap_max / 1000.0, cpu,
           pct(whole_hist, whole_n, 0.5), pct(whole_hist, whole_n, 0.99), whole_max / 1000.0,
           fixed_ ? (long long)streams_ - done_n - errors_n : 0LL,
           why[0], why[1], why[2], why[3]);
    return 0;
}

int main(int argc, char **argv) {
    struct rlimit rl = {MAXFD, MAXFD};
    setrlimit(RLIMIT_NOFILE, &rl);
    signal(SIGPIPE, SIG_IGN);  /* a peer that went away is a failed write, not an exit */
    if (argc == 3 && !strcmp(argv[1], "upstream")) return upstream(atoi(argv[2]));
    if ((argc == 9 || (argc == 10 && !strcmp(argv[9], "fixed"))) && !strcmp(argv[1], "client")) {
        fixed_ = argc == 10;
        return client(argc, argv);
    }
    fprintf(stderr, "usage: streamload upstream PORT | client PORT PATH MODEL KEY STREAMS SECONDS SEED [fixed]\n");
    return 2;
}
