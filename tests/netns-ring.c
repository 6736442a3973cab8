// tests/netns-ring.c: a ring allreduce (sum of floats) over plain TCP sockets, no MPI, for the emulated hosts of
// tests/netns-hosts.sh (`tests/netns-hosts.sh ring`, which compiles and starts it, one process per host). Every rank
// sends to the next host and receives from the one before at once (a sender and a receiver thread, both asleep in the
// kernel while they wait), in SEG-byte segments pipelined across the ring's 2(N-1) steps: a segment of step k leaves
// as soon as the same segment of step k-1 has arrived and been added. What an allreduce can reach between these hosts
// without MPI's machinery: the link in both directions at once plus the reduction (its time is printed apart).
//   netns-ring RANK N NET BYTES SEG ITERS   (host RANK is NET.<RANK+1>; port 5998; the first iteration is a warm-up)
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int rank, n, sin_fd, sout_fd;
static long long nbytes, seg;
static float *buf, *tmp;
static long long chunk_elems, seg_elems, nseg;  // per ring chunk (1/n of the buffer), per segment
static long long ready;  // segments received (and reduced) so far, over all steps
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static double red_s;

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

// step k (0 .. 2(n-1)-1): rank sends chunk (rank - k) mod n, receives chunk (rank - k - 1) mod n
static long long chunk_of(int k, int send) { return ((rank - k - (send ? 0 : 1)) % n + n) % n; }

static void seg_range(int k, long long j, int send, float **p, long long *cnt) {
    long long c = chunk_of(k, send), lo = c * chunk_elems + j * seg_elems;
    long long hi = c * chunk_elems + chunk_elems, end = lo + seg_elems < hi ? lo + seg_elems : hi;
    *p = buf + lo;
    *cnt = end - lo;
}

static void *sender(void *arg) {
    (void)arg;
    const int steps = 2 * (n - 1);
    for (int k = 0; k < steps; k++)
        for (long long j = 0; j < nseg; j++) {
            if (k > 0) {  // wait (asleep) for the segment's previous step
                pthread_mutex_lock(&mu);
                while (ready < (long long)(k - 1) * nseg + j + 1) pthread_cond_wait(&cv, &mu);
                pthread_mutex_unlock(&mu);
            }
            float *p; long long c;
            seg_range(k, j, 1, &p, &c);
            char *b = (char *)p; long long left = c * 4;
            while (left > 0) { ssize_t w = send(sout_fd, b, (size_t)left, 0); if (w <= 0) { perror("send"); exit(1); } b += w; left -= w; }
        }
    return NULL;
}

static void recv_all(void *dst, long long len) {
    char *b = dst;
    while (len > 0) { ssize_t r = recv(sin_fd, b, (size_t)len, 0); if (r <= 0) { perror("recv"); exit(1); } b += r; len -= r; }
}

static void receiver(void) {
    const int steps = 2 * (n - 1);
    for (int k = 0; k < steps; k++)
        for (long long j = 0; j < nseg; j++) {
            float *p; long long c;
            seg_range(k, j, 0, &p, &c);
            if (k < n - 1) {  // reduce-scatter: add what arrives
                recv_all(tmp, c * 4);
                double t = now();
                for (long long i = 0; i < c; i++) p[i] += tmp[i];
                red_s += now() - t;
            } else {
                recv_all(p, c * 4);  // all-gather: the reduced chunk, in place
            }
            pthread_mutex_lock(&mu); ready++; pthread_cond_signal(&cv); pthread_mutex_unlock(&mu);
        }
}

int main(int argc, char **argv) {
    if (argc != 7) { fprintf(stderr, "netns-ring RANK N NET BYTES SEG ITERS\n"); return 2; }
    rank = atoi(argv[1]); n = atoi(argv[2]); nbytes = atoll(argv[4]); seg = atoll(argv[5]);
    const int iters = atoi(argv[6]);
    if (n < 2 || rank < 0 || rank >= n || seg < 4 || nbytes < 4LL * n || iters < 1) {
        fprintf(stderr, "netns-ring: rank %d of %d, %lld bytes, %lld-byte segments, %d iterations: expected 0 <= RANK < "
                "N, N >= 2, BYTES >= 4N, SEG >= 4, ITERS >= 1\n", rank, n, nbytes, seg, iters);
        return 2;
    }
    chunk_elems = nbytes / 4 / n; seg_elems = seg / 4; nseg = (chunk_elems + seg_elems - 1) / seg_elems;
    buf = malloc((size_t)chunk_elems * n * 4); tmp = malloc((size_t)seg_elems * 4);
    if (!buf || !tmp) { fprintf(stderr, "netns-ring: out of memory for %lld bytes\n", nbytes); return 1; }
    for (long long i = 0; i < chunk_elems * n; i++) buf[i] = 1.0f;
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(5998)};
    if (bind(ls, (void *)&a, sizeof a) != 0 || listen(ls, 1) != 0) { perror("netns-ring: bind/listen port 5998"); return 1; }
    char ip[64]; snprintf(ip, sizeof ip, "%s.%d", argv[3], (rank + 1) % n + 1);
    sout_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in b = {.sin_family = AF_INET, .sin_port = htons(5998)};
    inet_pton(AF_INET, ip, &b.sin_addr);
    for (int t = 0; connect(sout_fd, (void *)&b, sizeof b) != 0; t++) {
        if (t > 400) { perror("connect"); return 1; }
        close(sout_fd); sout_fd = socket(AF_INET, SOCK_STREAM, 0); usleep(20000);
    }
    setsockopt(sout_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sin_fd = accept(ls, NULL, NULL);
    double best = 1e9, sum = 0;
    struct rusage r0, r1; getrusage(RUSAGE_SELF, &r0);
    for (int it = 0; it <= iters; it++) {  // iteration 0: warm-up
        char x = 0;  // a token round the ring, so that every rank starts together
        if (rank == 0) { send(sout_fd, &x, 1, 0); recv_all(&x, 1); } else { recv_all(&x, 1); send(sout_fd, &x, 1, 0); }
        ready = 0; red_s = 0;
        double t0 = now();
        pthread_t th; pthread_create(&th, NULL, sender, NULL);
        receiver();
        pthread_join(th, NULL);
        double t = now() - t0;
        if (it > 0) { sum += t; if (t < best) best = t; }
    }
    getrusage(RUSAGE_SELF, &r1);
    double cpu = r1.ru_utime.tv_sec - r0.ru_utime.tv_sec + (r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) * 1e-6 +
                 r1.ru_stime.tv_sec - r0.ru_stime.tv_sec + (r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) * 1e-6;
    long long wrong = 0;  // after iters+1 allreduces of ones, in place: n^(iters+1)
    double want = 1; for (int it = 0; it <= iters; it++) want *= n;
    for (long long i = 0; i < chunk_elems * n; i++) wrong += buf[i] != (float)want;
    double mean = sum / iters, bus = (double)chunk_elems * n * 4 / mean * 2.0 * (n - 1) / n;
    printf("ring: rank %d: %lld bytes, %lld-byte segments: %.2f ms mean (best %.2f), busbw %.3f GB/s (%.2f Gbit/s "
           "each way), reduction %.1f ms of the last, cpu %.2f s, wrong %lld\n", rank, nbytes, seg, mean * 1e3,
           best * 1e3, bus * 1e-9, bus * 8e-9, red_s * 1e3, cpu, wrong);
    return wrong != 0;
}
