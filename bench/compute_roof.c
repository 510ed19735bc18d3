// The compute roof of this CPU for the kernels' inner instructions: how many 512-bit (and 256-bit)
// vpdpbusd (int8 VNNI: 64 / 32 multiply-adds), vdpbf16ps (BF16: 32 / 16) and vfmadd231ps (f32:
// 16 / 8) one core and all requested threads retire per second, and for CPUs without VNNI the
// AVX2 int8 step the integer tiles run instead (a vpbroadcastd of 4 activation bytes from memory,
// a vpmaddubsw, a vpaddw: 32 multiply-adds; on 8 chains, see Int8Step256); the instructions on 12
// independent accumulator chains (more than latency x throughput on the x86 cores measured, and
// with the two operands within the 16 vector registers of an AVX2-only CPU: 16 chains spilled
// there and halved the 256-bit figure), best of 5 rounds. Prints G instructions/s and G
// multiply-adds/s; a prefill or batched decode that reaches the int8 or BF16
// figure is at the roof of this CPU for its format.
//
//   bench/compute_roof.sh [max_threads=2]
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHAINS 12
#define ITERATIONS 20000000L

static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef enum {
  kDpbusd512,
  kDpbusd256,
  kDpbf16512,
  kDpbf16256,
  kFma512,
  kFma256,
  kInt8Step256,
  kKinds
} Kind;
static const char* kNames[kKinds] = {"vpdpbusd zmm",  "vpdpbusd ymm",    "vdpbf16ps zmm",
                                     "vdpbf16ps ymm", "vfmadd231ps zmm", "vfmadd231ps ymm",
                                     "avx2 int8 step"};
static const int kMacs[kKinds] = {64, 32, 32, 16, 16, 8, 32};
static const int kZmm[kKinds] = {1, 0, 1, 0, 1, 0, 0};

static volatile float g_sink;

// Each loop keeps CHAINS accumulators live in registers; the sink stops the compiler from
// dropping the work. Each kind has its own target attribute, so the program runs (and skips what
// the CPU lacks) on any x86-64 CPU.
#define LOOP(type, init, step, reduce)                         \
  type a[CHAINS];                                              \
  for (int i = 0; i < CHAINS; ++i) a[i] = init;                \
  for (long n = 0; n < ITERATIONS; ++n) {                      \
    _Pragma("GCC unroll 12") for (int i = 0; i < CHAINS; ++i) { \
      a[i] = step;                                             \
    }                                                          \
  }                                                            \
  float s = 0;                                                 \
  for (int i = 0; i < CHAINS; ++i) s += (float)(reduce);       \
  g_sink = s;

#define VNNI512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define BF16_512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define AVX512 __attribute__((target("avx512f,fma")))
#define AVX2 __attribute__((target("avx2,fma")))

VNNI512 static void Dpbusd512(void) {
  const __m512i w = _mm512_set1_epi32(0x01010101), x = _mm512_set1_epi32(0x01020102);
  LOOP(__m512i, _mm512_set1_epi32(i), _mm512_dpbusd_epi32(a[i], w, x),
       _mm512_reduce_add_epi32(a[i]))
}
VNNI512 static void Dpbusd256(void) {
  const __m256i w = _mm256_set1_epi32(0x01010101), x = _mm256_set1_epi32(0x01020102);
  LOOP(__m256i, _mm256_set1_epi32(i), _mm256_dpbusd_epi32(a[i], w, x),
       _mm256_extract_epi32(a[i], 0))
}
BF16_512 static void Dpbf16512(void) {
  const __m512bh w = (__m512bh)_mm512_set1_epi32(0x3f803f80);  // bf16 1.0 pairs
  LOOP(__m512, _mm512_set1_ps((float)i), _mm512_dpbf16_ps(a[i], w, w), _mm512_reduce_add_ps(a[i]))
}
BF16_512 static void Dpbf16256(void) {
  const __m256bh w = (__m256bh)_mm256_set1_epi32(0x3f803f80);
  LOOP(__m256, _mm256_set1_ps((float)i), _mm256_dpbf16_ps(a[i], w, w), _mm256_cvtss_f32(a[i]))
}
AVX512 static void Fma512(void) {
  const __m512 w = _mm512_set1_ps(0.5f), x = _mm512_set1_ps(0.25f);
  LOOP(__m512, _mm512_set1_ps((float)i), _mm512_fmadd_ps(a[i], w, x), _mm512_reduce_add_ps(a[i]))
}
AVX2 static void Fma256(void) {
  const __m256 w = _mm256_set1_ps(0.5f), x = _mm256_set1_ps(0.25f);
  LOOP(__m256, _mm256_set1_ps((float)i), _mm256_fmadd_ps(a[i], w, x), _mm256_cvtss_f32(a[i]))
}

// The integer tiles' step: 8 accumulators (as a tile of 8 rows x 4 tokens keeps its 16-bit sums
// in 4-8 registers) each add the products of a code register with four activation bytes
// broadcast from memory, other words each iteration (main fills them, so the compiler cannot
// fold them). The empty asm keeps each sum in its register as the kernels do; without it GCC
// hoists the broadcasts and spills the sums.
int g_activations[64];
#define STEP(acc, k)                                                             \
  acc = _mm256_add_epi16(acc, _mm256_maddubs_epi16(w, _mm256_set1_epi32(x[k]))); \
  __asm__("" : "+x"(acc));
AVX2 static void Int8Step256(void) {
  const __m256i w = _mm256_set1_epi32(0x01020102);
  __m256i a0 = _mm256_set1_epi32(0), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (long n = 0; n < ITERATIONS * CHAINS / 8; ++n) {
    const int* x = g_activations + ((n & 7) << 3);
    STEP(a0, 0) STEP(a1, 1) STEP(a2, 2) STEP(a3, 3) STEP(a4, 4) STEP(a5, 5) STEP(a6, 6) STEP(a7, 7)
  }
  const __m256i s =
      _mm256_add_epi16(_mm256_add_epi16(_mm256_add_epi16(a0, a1), _mm256_add_epi16(a2, a3)),
                       _mm256_add_epi16(_mm256_add_epi16(a4, a5), _mm256_add_epi16(a6, a7)));
  g_sink = (float)_mm256_extract_epi32(s, 0);
}

static void (*const kRuns[kKinds])(void) = {Dpbusd512, Dpbusd256, Dpbf16512,  Dpbf16256,
                                            Fma512,    Fma256,    Int8Step256};

static void Run(Kind kind) { kRuns[kind](); }

typedef struct {
  Kind kind;
  pthread_barrier_t* barrier;
} Job;

static void* Worker(void* arg) {
  Job* job = (Job*)arg;
  pthread_barrier_wait(job->barrier);
  Run(job->kind);
  return NULL;
}

// Seconds for `threads` threads each running ITERATIONS x CHAINS instructions of `kind`.
static double Round(Kind kind, int threads) {
  pthread_t ids[64];
  Job job = {kind, NULL};
  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, NULL, (unsigned)threads + 1);
  job.barrier = &barrier;
  for (int t = 0; t < threads; ++t) pthread_create(&ids[t], NULL, Worker, &job);
  pthread_barrier_wait(&barrier);
  const double start = Now();
  for (int t = 0; t < threads; ++t) pthread_join(ids[t], NULL);
  const double seconds = Now() - start;
  pthread_barrier_destroy(&barrier);
  return seconds;
}

int main(int argc, char** argv) {
  const int max_threads = argc > 1 ? atoi(argv[1]) : 2;
  for (int i = 0; i < 64; ++i) g_activations[i] = 0x01010101 * (argc + i % 3);
  __builtin_cpu_init();
  const int vnni = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl");
  const int bf16 = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512vl");
  const int avx512 = __builtin_cpu_supports("avx512f");
  printf("%-17s %7s %14s %14s\n", "instruction", "threads", "G instr/s", "G MAC/s");
  for (int kind = 0; kind < kKinds; ++kind) {
    const int zmm = kZmm[kind];
    if ((kind <= kDpbusd256 && !vnni) || (kind >= kDpbf16512 && kind <= kDpbf16256 && !bf16) ||
        (zmm && !avx512)) {
      continue;
    }
    for (int threads = 1; threads <= max_threads; threads *= 2) {
      double best = 1e30;
      for (int r = 0; r < 5; ++r) {
        const double s = Round((Kind)kind, threads);
        if (s < best) best = s;
      }
      const double per_second = (double)threads * ITERATIONS * CHAINS / best;
      printf("%-17s %7d %14.2f %14.1f\n", kNames[kind], threads, per_second * 1e-9,
             per_second * kMacs[kind] * 1e-9);
    }
  }
  return 0;
}
