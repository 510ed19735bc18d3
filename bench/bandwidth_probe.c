// Read-bandwidth probe: the memory roofline for decode (which streams every weight once per step).
// For working sets from 8 MB to 1 GB, 1 and 2 threads each sum their own contiguous share of the
// buffer with the widest loads the CPU has (512-bit, or 256-bit without AVX-512; independent
// accumulators, so the loop is load-bound, and the sum is
// printed so the compiler cannot drop the loads). Prints aggregate GB/s (10^9 bytes per second),
// the best of several timed rounds after one warm-up pass.
//
// Built by bench/bandwidth_probe.sh with the system compiler (not part of the CMake product):
//   cc -O2 -march=native -pthread bench/bandwidth_probe.c -o bandwidth_probe
//   ./bandwidth_probe [max_threads=2] [max_mb=1024]
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kMaxThreads = 64, kRounds = 5 };

typedef struct {
  const float* data;
  size_t floats;      // this thread's share, a multiple of 64
  int passes;         // how many times to read the share per round
  double sum;         // keeps the loads observable
  pthread_barrier_t* start;
  pthread_barrier_t* done;
  int rounds;
} Worker;

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#if defined(__AVX512F__)
static double read_share(const float* p, size_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
    a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}
#else
// CPUs without AVX-512: 256-bit loads, eight accumulators (still load-bound).
static double read_share(const float* p, size_t n) {
  __m256 a[8];
  for (int k = 0; k < 8; ++k) a[k] = _mm256_setzero_ps();
  for (size_t i = 0; i < n; i += 64) {
    for (int k = 0; k < 8; ++k) a[k] = _mm256_add_ps(a[k], _mm256_load_ps(p + i + 8 * k));
  }
  float out[8];
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2], a[3])),
                           _mm256_add_ps(_mm256_add_ps(a[4], a[5]), _mm256_add_ps(a[6], a[7])));
  _mm256_storeu_ps(out, s);
  double sum = 0.0;
  for (int k = 0; k < 8; ++k) sum += out[k];
  return sum;
}
#endif

static void* worker_main(void* arg) {
  Worker* w = (Worker*)arg;
  for (int r = 0; r < w->rounds; ++r) {
    pthread_barrier_wait(w->start);
    for (int p = 0; p < w->passes; ++p) w->sum += read_share(w->data, w->floats);
    pthread_barrier_wait(w->done);
  }
  return NULL;
}

// Returns the best aggregate GB/s of kRounds rounds (plus one untimed warm-up round).
static double measure(const float* buf, size_t bytes, int threads, double* checksum) {
  size_t per_thread = (bytes / sizeof(float) / (size_t)threads) / 64 * 64;
  // Enough passes that one round reads at least ~2 GB, so short working sets are timed fairly.
  int passes = (int)((2.0e9 / (double)bytes) + 1.0);
  pthread_barrier_t start, done;
  pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
  pthread_barrier_init(&done, NULL, (unsigned)threads + 1);
  pthread_t tid[kMaxThreads];
  Worker w[kMaxThreads];
  for (int t = 0; t < threads; ++t) {
    w[t] = (Worker){buf + (size_t)t * per_thread, per_thread, passes, 0.0, &start, &done,
                    kRounds + 1};
    pthread_create(&tid[t], NULL, worker_main, &w[t]);
  }
  double best = 0.0;
  for (int r = 0; r < kRounds + 1; ++r) {
    double t0 = now_seconds();
    pthread_barrier_wait(&start);
    pthread_barrier_wait(&done);
    double seconds = now_seconds() - t0;
    double gbps = (double)per_thread * sizeof(float) * threads * passes / seconds / 1e9;
    if (r > 0 && gbps > best) best = gbps;
  }
  for (int t = 0; t < threads; ++t) {
    pthread_join(tid[t], NULL);
    *checksum += w[t].sum;
  }
  pthread_barrier_destroy(&start);
  pthread_barrier_destroy(&done);
  return best;
}

int main(int argc, char** argv) {
  int max_threads = argc > 1 ? atoi(argv[1]) : 2;
  size_t max_mb = argc > 2 ? (size_t)atol(argv[2]) : 1024;
  if (max_threads < 1 || max_threads > kMaxThreads || max_mb < 8) {
    fprintf(stderr, "usage: %s [max_threads 1..%d] [max_mb >= 8]\n", argv[0], kMaxThreads);
    return 2;
  }
  size_t max_bytes = max_mb << 20;
  float* buf = aligned_alloc(64, max_bytes);
  if (buf == NULL) {
    fprintf(stderr, "cannot allocate %zu MB\n", max_mb);
    return 1;
  }
  for (size_t i = 0; i < max_bytes / sizeof(float); ++i) buf[i] = (float)(i & 1023) * 1e-3f;

  double checksum = 0.0;
  printf("%-10s", "set_MB");
  for (int t = 1; t <= max_threads; ++t) printf("  %2d_thread_GB/s", t);
  printf("\n");
  for (size_t mb = 8; mb <= max_mb; mb *= 2) {
    printf("%-10zu", mb);
    for (int t = 1; t <= max_threads; ++t) {
      printf("  %15.1f", measure(buf, mb << 20, t, &checksum));
      fflush(stdout);
    }
    printf("\n");
  }
  fprintf(stderr, "checksum %g\n", checksum);
  free(buf);
  return 0;
}
